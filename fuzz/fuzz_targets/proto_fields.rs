//! The single-value parsers behind the protocol and the bundle columns, each with its round
//! trip (parse → spelling → parse): boot ids, hex, workload results, clocksources, error
//! codes and kinds, engines, knob lists, limits, and the guest's command-line parser
//! (`GuestConfig::from_cmdline`, which reads what the host's boot-parameter builder wrote).
#![no_main]
use libfuzzer_sys::fuzz_target;
use truecold_proto::kinds::{Backing, ContractKind, Engine, ErrorKind, HostKind, Transport};
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::measure::Stage;
use truecold_proto::tune::{check_set, parse_knobs, Knob, TuneGuest};
use truecold_proto::{hex, unhex, BootId, Clocksource, ErrorCode, GuestConfig, Workload};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let s = text.as_ref();
    match which % 12 {
        0 => {
            if let Some(b) = BootId::parse(s) {
                assert_eq!(b.as_str(), s.trim_end());
                assert_eq!(BootId::parse(b.as_str()), Some(b));
            }
        }
        1 => {
            if let Some(n) = unhex::<16>(s) {
                assert_eq!(hex(&n), s.to_ascii_lowercase());
            }
            if let Some(n) = unhex::<32>(s) {
                assert_eq!(unhex::<32>(&hex(&n)), Some(n));
            }
        }
        2 => {
            if let Some(w) = Workload::decode(s) {
                assert_eq!(w.encode(), s);
            }
            if let Some(c) = ErrorCode::from_name(s) {
                assert_eq!(c.name(), s);
                assert_eq!(ErrorCode::from_byte(c as u8), Ok(c));
            }
            if let Some(&b) = rest.first() {
                if let Ok(c) = ErrorCode::from_byte(b) {
                    assert_eq!(c as u8, b);
                }
            }
        }
        3 => {
            if let Some(c) = Clocksource::parse(s) {
                assert_eq!(c.as_str(), s.trim());
                assert!(!c.as_str().is_empty() && c.as_str().len() <= Clocksource::MAX_LEN);
                assert_eq!(Clocksource::parse(c.as_str()).as_ref(), Some(&c));
            }
        }
        4 => {
            if let Some(k) = ErrorKind::parse(s) {
                assert_eq!(k.as_string(), s);
            }
        }
        5 => {
            if let Ok(e) = Engine::parse(s) {
                assert_eq!(e.as_str(), s);
            }
            if let Some(t) = Transport::parse(s) {
                assert_eq!(t.as_str(), s);
            }
            if let Some(k) = ContractKind::parse(s) {
                assert_eq!(k.as_str(), s);
            }
            if let Some(h) = HostKind::from_name(s) {
                assert_eq!(h.as_str(), s);
            }
            if let Ok(b) = Backing::parse(s) {
                assert_eq!(b.as_str(), s);
            }
            if let Some(st) = Stage::from_name(s) {
                assert_eq!(st.name(), s);
            }
        }
        6 | 7 => {
            let guest = if which % 12 == 6 {
                TuneGuest::Linux
            } else {
                TuneGuest::Probe
            };
            if let Some(k) = Knob::parse(s) {
                assert_eq!(k.as_str(), s);
            }
            if let Ok(knobs) = parse_knobs(s, guest) {
                assert!(knobs.windows(2).all(|w| w[0] < w[1]), "{knobs:?}");
                let list: Vec<&str> = knobs.iter().map(|k| k.as_str()).collect();
                assert_eq!(parse_knobs(&list.join(","), guest).as_ref(), Ok(&knobs));
                let _ = check_set(&knobs, guest);
            }
        }
        8 => {
            if let Ok(v) = Vcpus::parse(s) {
                assert_eq!(Vcpus::parse(&v.to_string()), Ok(v));
            }
            if let Ok(m) = GuestMem::parse(s) {
                assert_eq!(GuestMem::from_mib(m.mib()), Ok(m));
                assert_eq!(m.bytes() >> 20, m.mib());
            }
        }
        _ => {
            if let Ok(c) = GuestConfig::from_cmdline(s) {
                // What it took, spelled out again, parses to the same config.
                let mut again = format!(
                    "truecold.mem={} truecold.probe={} truecold.transport={} truecold.engine={} truecold.attribution={}",
                    c.mem,
                    c.probe,
                    c.transport.as_str(),
                    c.engine.as_str(),
                    u8::from(c.attribution)
                );
                if let Some(n) = &c.net {
                    again.push_str(&format!(" truecold.net={n}"));
                }
                assert_eq!(
                    GuestConfig::from_cmdline(&again).as_ref(),
                    Ok(&c),
                    "{again}"
                );
            }
        }
    }
});
