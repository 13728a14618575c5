//! The attribution trace from `/dev/kmsg` records (pure; `main.rs` does the reading): each
//! record is `<prio>,<seq>,<ts_us>,<flags>[,…];<text>\n` followed by optional ` KEY=value`
//! continuation lines (Documentation/ABI/testing/dev-kmsg). [`TraceBuilder`] turns the
//! `initcall_debug` pairs, the [`KERNEL_MARKS`] and guest-init's own sync line into the `TC1`
//! trace lines of `truecold_proto::trace`, within its bounds.

use truecold_proto::trace::{
    valid_name, Initcall, KernelMark, KmsgSync, TraceLine, KERNEL_MARKS, MAX_INITCALLS,
    MAX_KMSG_BYTES, MAX_KMSG_RECORDS, SYNC_PREFIX,
};

/// One record's printk time (µs) and text (the first line after `;`).
pub fn parse_record(rec: &[u8]) -> Option<(u64, &str)> {
    let text = core::str::from_utf8(rec).ok()?;
    let (head, body) = text.split_once(';')?;
    let mut fields = head.split(',');
    let _prio = fields.next()?;
    let _seq = fields.next()?;
    let ts: u64 = fields.next()?.parse().ok()?;
    let line = body.split('\n').next().unwrap_or("");
    Some((ts, line))
}

/// The function of a `%pS` word: `name+0x0/0x20` → `name`; `None` when not a wire name.
fn func_name(word: &str) -> Option<&str> {
    let name = word.split('+').next().unwrap_or("");
    valid_name(name).then_some(name)
}

/// Collects the trace from records fed in log order.
#[derive(Debug, Default)]
pub struct TraceBuilder {
    records: u64,
    bytes: usize,
    truncated: bool,
    pending: Option<(String, u64)>,
    sync: Option<(u64, u64)>,
    initcalls: Vec<Initcall>,
    marks: Vec<KernelMark>,
}

impl TraceBuilder {
    /// Whether a bound ([`MAX_KMSG_RECORDS`], [`MAX_KMSG_BYTES`]) stops the reading.
    pub fn full(&self) -> bool {
        self.truncated
    }

    /// Takes one record (as `read` returned it). Past a bound, records are counted as
    /// truncation and ignored.
    pub fn feed(&mut self, rec: &[u8]) {
        if self.records as usize >= MAX_KMSG_RECORDS
            || self.bytes.saturating_add(rec.len()) > MAX_KMSG_BYTES
        {
            self.truncated = true;
            return;
        }
        self.records += 1;
        self.bytes += rec.len();
        let Some((ts, text)) = parse_record(rec) else {
            return;
        };
        if let Some(rest) = text.strip_prefix(SYNC_PREFIX) {
            if let Ok(mono) = rest.trim().parse::<u64>() {
                self.sync.get_or_insert((ts, mono));
            }
            return;
        }
        if let Some(rest) = text.strip_prefix("calling  ") {
            // `calling  <fn> @ <pid>`
            self.pending = rest
                .split(' ')
                .next()
                .and_then(func_name)
                .map(|f| (f.to_string(), ts));
            return;
        }
        if let Some(rest) = text.strip_prefix("initcall ") {
            // `initcall <fn> returned <ret> after <n> usecs`
            let w: Vec<&str> = rest.split(' ').collect();
            if let [f, "returned", ret, "after", n, "usecs"] = w[..] {
                let (Some(f), Ok(ret), Ok(dur_us)) = (func_name(f), ret.parse(), n.parse()) else {
                    return;
                };
                let start_us = match self.pending.take() {
                    Some((p, start)) if p == f => start,
                    _ => ts.saturating_sub(dur_us),
                };
                if self.initcalls.len() < MAX_INITCALLS {
                    self.initcalls.push(Initcall {
                        func: f.to_string(),
                        start_us,
                        dur_us,
                        ret,
                    });
                } else {
                    self.truncated = true;
                }
            }
            return;
        }
        for (name, prefix) in KERNEL_MARKS {
            if text.starts_with(prefix) && !self.marks.iter().any(|m| m.name == name) {
                self.marks.push(KernelMark {
                    name: name.to_string(),
                    t_us: ts,
                });
            }
        }
    }

    /// The lines to send: the sync line first (none when guest-init's sync record was not
    /// found: then the trace cannot be placed on the guest clock and nothing is sent), then
    /// the initcalls and the marks in log order.
    pub fn lines(self) -> Vec<TraceLine> {
        let Some((kmsg_us, mono_ns)) = self.sync else {
            return Vec::new();
        };
        let mut out = vec![TraceLine::Sync(KmsgSync {
            kmsg_us,
            mono_ns,
            records: self.records,
            truncated: self.truncated,
        })];
        out.extend(self.initcalls.into_iter().map(TraceLine::Initcall));
        out.extend(self.marks.into_iter().map(TraceLine::Mark));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ts: u64, text: &str) -> Vec<u8> {
        format!("7,12,{ts},-;{text}\n SUBSYSTEM=x\n").into_bytes()
    }

    #[test]
    fn initcalls_marks_and_sync() {
        let mut b = TraceBuilder::default();
        for r in [
            rec(0, "Linux version 6.12.0 (x@y) #1"),
            rec(10, "calling  0xffffffff81f7a2e5 @ 1"),
            rec(30, "initcall 0xffffffff81f7a2e5 returned 0 after 18 usecs"),
            rec(40, "calling  foo_init+0x0/0x20 @ 1"),
            rec(
                1040,
                "initcall foo_init+0x0/0x20 returned -19 after 1000 usecs",
            ),
            rec(2000, "initcall bar returned 0 after 5 usecs"),
            rec(2100, "calling  bad/name @ 1"),
            rec(2200, "Run /init as init process"),
            rec(2300, "Run /init as init process"),
            b"garbage without fields".to_vec(),
            rec(5000, "truecold-ksync mono_ns=4999000"),
        ] {
            b.feed(&r);
        }
        let lines = b.lines();
        assert_eq!(
            lines[0],
            TraceLine::Sync(KmsgSync {
                kmsg_us: 5000,
                mono_ns: 4_999_000,
                records: 11,
                truncated: false
            })
        );
        let calls: Vec<_> = lines
            .iter()
            .filter_map(|l| match l {
                TraceLine::Initcall(c) => Some((c.func.as_str(), c.start_us, c.dur_us, c.ret)),
                _ => None,
            })
            .collect();
        assert_eq!(
            calls,
            vec![
                ("0xffffffff81f7a2e5", 10, 18, 0),
                ("foo_init", 40, 1000, -19),
                ("bar", 1995, 5, 0),
            ]
        );
        let marks: Vec<_> = lines
            .iter()
            .filter_map(|l| match l {
                TraceLine::Mark(m) => Some((m.name.as_str(), m.t_us)),
                _ => None,
            })
            .collect();
        assert_eq!(marks, vec![("linux_version", 0), ("run_init", 2200)]);
        // Every line fits the wire.
        for l in lines {
            let m = truecold_proto::Message::Trace(l);
            assert_eq!(
                truecold_proto::Message::decode(m.encode().as_bytes()),
                Ok(m)
            );
        }
    }

    #[test]
    fn no_sync_no_trace_and_bounds_hold() {
        let mut b = TraceBuilder::default();
        b.feed(&rec(1, "calling  f @ 1"));
        assert!(b.lines().is_empty());
        let mut b = TraceBuilder::default();
        b.feed(&rec(1, "truecold-ksync mono_ns=5"));
        for i in 0..MAX_KMSG_RECORDS + 10 {
            b.feed(&rec(i as u64, "initcall f returned 0 after 1 usecs"));
        }
        assert!(b.full());
        let lines = b.lines();
        match &lines[0] {
            TraceLine::Sync(s) => {
                assert!(s.truncated);
                assert_eq!(s.records as usize, MAX_KMSG_RECORDS);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(lines.len() - 1, MAX_INITCALLS);
        let mut b = TraceBuilder::default();
        b.feed(&vec![b'x'; MAX_KMSG_BYTES + 1]);
        assert!(b.full());
    }
}
