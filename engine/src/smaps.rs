//! The engine process's guest-memory mapping, from `/proc/<pid>/smaps` (pure parser).
//!
//! Rule: among the readable-writable anonymous or memfd mappings (no path, `[anon:…]`,
//! `/memfd:…`, `/anon_hugepage`), take the largest; if it alone is the configured size, that
//! is guest memory; else if the two largest add up to it exactly (an engine that splits RAM
//! around the 32-bit hole below 4 GiB maps two regions), those two. Nothing else is guessed:
//! no match is a [`MappingError::NoMatch`] that keeps the largest sizes seen. The chosen
//! mappings must have one `KernelPageSize`.

use truecold_proto::report::HostMapping;

/// One mapping of smaps, as far as the rule needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    /// The path column (empty for plain anonymous memory).
    pub name: String,
    /// `KernelPageSize`, bytes.
    pub kernel_page_size: Option<u64>,
    /// `AnonHugePages`, bytes.
    pub anon_huge_bytes: u64,
}

impl Region {
    /// Bytes mapped.
    pub fn size(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// Anonymous or memfd, readable and writable: what guest RAM can be.
    pub fn is_candidate(&self) -> bool {
        let anon = self.name.is_empty()
            || self.name.starts_with("[anon")
            || self.name.starts_with("/memfd:")
            || self.name.starts_with("/anon_hugepage");
        anon && self.perms.starts_with("rw")
    }
}

/// Why no guest-memory mapping was taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error(
        "no anonymous/memfd mapping (or pair) of exactly {configured} bytes; largest: {largest:?}"
    )]
    NoMatch { configured: u64, largest: Vec<u64> },
    #[error("the guest-memory mappings {sizes:?} have different page sizes {page_sizes:?}")]
    PageSizes {
        sizes: Vec<u64>,
        page_sizes: Vec<Option<u64>>,
    },
    #[error("reading {path}: {message}")]
    Read { path: String, message: String },
}

fn header(line: &str) -> Option<Region> {
    let mut f = line.split_whitespace();
    let range = f.next()?;
    let (a, b) = range.split_once('-')?;
    let start = u64::from_str_radix(a, 16).ok()?;
    let end = u64::from_str_radix(b, 16).ok()?;
    let perms = f.next()?;
    let (_offset, _dev, _inode) = (f.next()?, f.next()?, f.next()?);
    let name = f.collect::<Vec<_>>().join(" ");
    Some(Region {
        start,
        end,
        perms: perms.to_string(),
        name,
        kernel_page_size: None,
        anon_huge_bytes: 0,
    })
}

/// `Key:   123 kB` → bytes.
fn kb_field(line: &str, key: &str) -> Option<u64> {
    let rest = line.strip_prefix(key)?.strip_prefix(':')?;
    let n = rest.trim().strip_suffix("kB")?.trim();
    n.parse::<u64>().ok()?.checked_mul(1024)
}

/// Every mapping of an smaps text (lines that are neither a header nor a field are skipped).
pub fn parse(text: &str) -> Vec<Region> {
    let mut out: Vec<Region> = Vec::new();
    for line in text.lines() {
        if let Some(r) = header(line) {
            out.push(r);
        } else if let Some(cur) = out.last_mut() {
            if let Some(v) = kb_field(line, "KernelPageSize") {
                cur.kernel_page_size = Some(v);
            } else if let Some(v) = kb_field(line, "AnonHugePages") {
                cur.anon_huge_bytes = v;
            }
        }
    }
    out
}

/// The guest-memory mapping of `configured` bytes in `text` (see the module's rule).
pub fn guest_mapping(text: &str, configured: u64) -> Result<HostMapping, MappingError> {
    let mut c: Vec<Region> = parse(text)
        .into_iter()
        .filter(Region::is_candidate)
        .collect();
    c.sort_by(|a, b| b.size().cmp(&a.size()).then(a.start.cmp(&b.start)));
    let chosen: &[Region] = match c.as_slice() {
        [a, ..] if a.size() == configured => &c[..1],
        [a, b, ..] if a.size().checked_add(b.size()) == Some(configured) => &c[..2],
        _ => {
            return Err(MappingError::NoMatch {
                configured,
                largest: c.iter().take(4).map(Region::size).collect(),
            })
        }
    };
    let pages: Vec<Option<u64>> = chosen.iter().map(|r| r.kernel_page_size).collect();
    match pages.as_slice() {
        [Some(p), rest @ ..] if rest.iter().all(|q| *q == Some(*p)) => Ok(HostMapping {
            sizes: chosen.iter().map(Region::size).collect(),
            kernel_page_size: *p,
            anon_huge_bytes: chosen.iter().map(|r| r.anon_huge_bytes).sum(),
        }),
        _ => Err(MappingError::PageSizes {
            sizes: chosen.iter().map(Region::size).collect(),
            page_sizes: pages,
        }),
    }
}

/// Reads `/proc/<pid>/smaps` and applies [`guest_mapping`].
pub fn read_guest_mapping(pid: u32, configured: u64) -> Result<HostMapping, MappingError> {
    let path = format!("/proc/{pid}/smaps");
    let text = std::fs::read_to_string(&path).map_err(|e| MappingError::Read {
        path: path.clone(),
        message: e.to_string(),
    })?;
    guest_mapping(&text, configured)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn entry(start: u64, size: u64, perms: &str, name: &str, page_kb: u64, huge_kb: u64) -> String {
        format!(
            "{start:x}-{:x} {perms} 00000000 00:00 0                          {name}\n\
             Size:             {} kB\n\
             KernelPageSize:        {page_kb} kB\n\
             MMUPageSize:           {page_kb} kB\n\
             Rss:                   8 kB\n\
             AnonHugePages:    {huge_kb} kB\n\
             VmFlags: rd wr mr mw me ac sd\n",
            start + size,
            size / 1024
        )
    }

    fn around(guest: &str) -> String {
        // A binary, the heap, a stack and a PROT_NONE guard: none of them is guest memory.
        let mut s = entry(0x5555_0000_0000, 2 * MIB, "r-xp", "/usr/bin/engine", 4, 0);
        s.push_str(&entry(0x5556_0000_0000, 64 * MIB, "rw-p", "[heap]", 4, 0));
        s.push_str(&entry(0x7f00_0000_0000, 512 * MIB, "---p", "", 4, 0));
        s.push_str(guest);
        s.push_str(&entry(0x7fff_0000_0000, MIB, "rw-p", "[stack]", 4, 0));
        s.push_str(&entry(0x7ffe_0000_0000, 8 * MIB, "rw-p", "", 4, 0));
        s
    }

    #[test]
    fn anon_4k_mapping() {
        let t = around(&entry(0x7f10_0000_0000, 256 * MIB, "rw-p", "", 4, 0));
        let m = guest_mapping(&t, 256 * MIB).unwrap();
        assert_eq!(m.sizes, vec![256 * MIB]);
        assert_eq!(m.kernel_page_size, 4096);
        assert_eq!(m.anon_huge_bytes, 0);
        assert_eq!(m.total(), 256 * MIB);
    }

    #[test]
    fn thp_and_memfd_mappings() {
        let t = around(&entry(
            0x7f10_0000_0000,
            1024 * MIB,
            "rw-s",
            "/memfd:ch_ram (deleted)",
            4,
            300 * 1024,
        ));
        let m = guest_mapping(&t, 1024 * MIB).unwrap();
        assert_eq!(m.kernel_page_size, 4096);
        assert_eq!(m.anon_huge_bytes, 300 * MIB);
        let t = around(&entry(
            0x7f10_0000_0000,
            64 * MIB,
            "rw-p",
            "[anon:guest]",
            4,
            0,
        ));
        assert!(guest_mapping(&t, 64 * MIB).is_ok());
    }

    #[test]
    fn hugetlb_2m_mapping() {
        let t = around(&entry(
            0x7f10_0000_0000,
            512 * MIB,
            "rw-p",
            "/anon_hugepage (deleted)",
            2048,
            0,
        ));
        let m = guest_mapping(&t, 512 * MIB).unwrap();
        assert_eq!(m.kernel_page_size, 2 * MIB);
    }

    #[test]
    fn ram_split_around_the_32_bit_hole() {
        let mut g = entry(0x7e00_0000_0000, 3072 * MIB, "rw-p", "", 4, 0);
        g.push_str(&entry(0x7f10_0000_0000, 1024 * MIB, "rw-p", "", 4, 0));
        let m = guest_mapping(&around(&g), 4096 * MIB).unwrap();
        assert_eq!(m.sizes, vec![3072 * MIB, 1024 * MIB]);
        assert_eq!(m.total(), 4096 * MIB);
        // The split halves must agree on the page size.
        let mut g = entry(0x7e00_0000_0000, 3072 * MIB, "rw-p", "", 4, 0);
        g.push_str(&entry(0x7f10_0000_0000, 1024 * MIB, "rw-p", "", 2048, 0));
        assert!(matches!(
            guest_mapping(&around(&g), 4096 * MIB),
            Err(MappingError::PageSizes { .. })
        ));
    }

    #[test]
    fn no_mapping_of_the_configured_size_keeps_the_largest() {
        // 256 MiB configured, but the engine mapped 260 MiB (or nothing that size).
        let t = around(&entry(0x7f10_0000_0000, 260 * MIB, "rw-p", "", 4, 0));
        match guest_mapping(&t, 256 * MIB) {
            Err(MappingError::NoMatch {
                configured,
                largest,
            }) => {
                assert_eq!(configured, 256 * MIB);
                assert_eq!(
                    largest,
                    vec![260 * MIB, 8 * MIB],
                    "the heap is not a candidate"
                );
            }
            other => panic!("{other:?}"),
        }
        // Three pieces that would add up are not guessed.
        let mut g = entry(0x7e00_0000_0000, 128 * MIB, "rw-p", "", 4, 0);
        g.push_str(&entry(0x7e10_0000_0000, 64 * MIB, "rw-p", "", 4, 0));
        g.push_str(&entry(0x7e20_0000_0000, 64 * MIB, "rw-p", "", 4, 0));
        assert!(guest_mapping(&g, 256 * MIB).is_err());
        // A read-only or PROT_NONE reservation of the right size is not guest memory.
        let t = entry(0x7f10_0000_0000, 256 * MIB, "---p", "", 4, 0);
        assert!(guest_mapping(&t, 256 * MIB).is_err());
        // Nothing at all.
        assert!(matches!(
            guest_mapping("", 256 * MIB),
            Err(MappingError::NoMatch { ref largest, .. }) if largest.is_empty()
        ));
    }

    #[test]
    fn garbage_does_not_panic() {
        for t in [
            "zz-yy rw-p 0 0 0\nKernelPageSize: x kB\n",
            "KernelPageSize: 4 kB\n",
            "1000-0 rw-p 0 00:00 0\n",
            "\u{0}\u{ff}",
        ] {
            let _ = parse(t);
            assert!(guest_mapping(t, 4096).is_err());
        }
    }
}
