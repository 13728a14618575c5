//! Helpers shared by the fuzz targets: a reader that turns the fuzzer's bytes into the
//! structured inputs some targets need (numbers, flags, slices), never failing (missing
//! bytes read as zeros), so every input is a valid case.

/// Takes values off the front of the fuzzer's bytes.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    /// The next `n` bytes (fewer at the end).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        head
    }

    pub fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }

    pub fn u16(&mut self) -> u16 {
        let mut a = [0u8; 2];
        let b = self.bytes(2);
        a[..b.len()].copy_from_slice(b);
        u16::from_le_bytes(a)
    }

    pub fn u32(&mut self) -> u32 {
        let mut a = [0u8; 4];
        let b = self.bytes(4);
        a[..b.len()].copy_from_slice(b);
        u32::from_le_bytes(a)
    }

    pub fn u64(&mut self) -> u64 {
        let mut a = [0u8; 8];
        let b = self.bytes(8);
        a[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(a)
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// A slice whose length is the next byte.
    pub fn short(&mut self) -> &'a [u8] {
        let n = usize::from(self.u8());
        self.bytes(n)
    }

    /// Bytes left.
    pub fn rest_len(&self) -> usize {
        self.data.len()
    }

    /// Whatever is left.
    pub fn rest(&mut self) -> &'a [u8] {
        self.bytes(usize::MAX)
    }
}

/// The rows and declarations of a committed bundle (results/), for the readers that check
/// a file against a bundle's rows, read in the bundle's own schema. A bundle no longer
/// readable (a schema verify dropped) stops the target at its first input, naming the file:
/// point these paths at a current bundle.
pub fn committed_bundle() -> &'static (
    Vec<truecold_proof::schema::Sample>,
    truecold_proof::reports::Expect,
) {
    use std::sync::OnceLock;
    static B: OnceLock<(
        Vec<truecold_proof::schema::Sample>,
        truecold_proof::reports::Expect,
    )> = OnceLock::new();
    B.get_or_init(|| {
        let result = truecold_proof::bundle::parse_result(include_bytes!(
            "../../results/20261130T231633Z-nested-linux-sequential-1vcpu-1024mib/result.json"
        ))
        .expect("results/20261130T231633Z-nested-linux-sequential-1vcpu-1024mib/result.json reads");
        // Read in the bundle's own schema (verify's rule), so a newer schema does not stop it.
        let samples = truecold_proof::csv::read_schema_samples_from(
            &include_bytes!(
                "../../results/20261130T231633Z-nested-linux-sequential-1vcpu-1024mib/samples.csv"
            )[..],
            result.schema_version,
        )
        .expect("results/20261130T231633Z-nested-linux-sequential-1vcpu-1024mib/samples.csv reads");
        (samples, truecold_proof::reports::Expect::of(&result))
    })
}
