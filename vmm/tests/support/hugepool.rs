//! A 2 MiB huge-page pool for a test (shared by the VMM's and the bench's tests through
//! `#[path]`): reserved through /proc/sys/vm/nr_hugepages (root), restored on drop.
#![allow(dead_code)]

/// Sets vm.nr_hugepages for the test and restores it on drop.
pub struct HugePool {
    old: String,
}

/// The default-size (2 MiB) pool's size.
pub const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

impl HugePool {
    pub fn set(pages: u64) -> Self {
        let old = std::fs::read_to_string(NR_HUGEPAGES)
            .unwrap_or_else(|e| panic!("cannot read {NR_HUGEPAGES} ({e}): run the tests as root"));
        // The guard exists before the first write, so the pool is restored even when the
        // reservation falls short and the assertion below fails.
        let guard = HugePool { old };
        let mut got = reserve(pages);
        if got < pages {
            // Page cache (e.g. a kernel build just before) can leave too few free 2 MiB
            // blocks: drop clean caches, compact, and ask once more.
            let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
            let _ = std::fs::write("/proc/sys/vm/compact_memory", "1");
            got = reserve(pages);
        }
        assert!(got >= pages, "the host gave {got} of {pages} huge pages");
        guard
    }
}

/// Asks for `pages` huge pages; returns how many the kernel reserved.
fn reserve(pages: u64) -> u64 {
    std::fs::write(NR_HUGEPAGES, pages.to_string())
        .unwrap_or_else(|e| panic!("cannot write {NR_HUGEPAGES} ({e}): run the tests as root"));
    std::fs::read_to_string(NR_HUGEPAGES)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

impl Drop for HugePool {
    fn drop(&mut self) {
        let _ = std::fs::write(NR_HUGEPAGES, self.old.trim());
    }
}
