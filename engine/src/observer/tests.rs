use super::*;
use truecold_proto::{ErrorCode, GuestPlatform, Reply, Workload};

const NONCE: [u8; NONCE_LEN] = [7; NONCE_LEN];

fn id(n: u8) -> BootId {
    BootId::parse(&format!("{n:08x}-1111-4222-8333-444444444444")).expect("valid")
}

fn ready(n: u8) -> String {
    Message::Ready { boot_id: id(n) }.encode()
}

fn reply(n: u8, nonce: &[u8; NONCE_LEN]) -> String {
    Message::Reply(Reply::new(nonce, id(n))).encode()
}

fn record(n: u8) -> String {
    Message::Record(GuestRecord {
        boot_id: Some(id(n)),
        t_init_ns: 1,
        t_ready_ns: 2,
        t_reply_ns: 3,
        t_record_ns: 4,
        mem_configured: 1 << 28,
        mem_firmware_ram: (1 << 28) - 0x6_0400,
        mem_total: 250 << 20,
        mem_present: (1 << 28) - 0x6_0400 - 7168,
        mem_managed: 250 << 20,
        mem_probe: 1 << 20,
        cpus: 2,
        platform: GuestPlatform {
            packages: 1,
            cores_per_package: 2,
            threads_per_core: 1,
            tsc_deadline_timer: true,
            constant_tsc: true,
            nonstop_tsc: true,
            tsc_unstable: false,
            clocksource: None,
        },
        workload: Workload::BenchOk,
        code: ErrorCode::Ok,
    })
    .encode()
}

/// Feeds `chunks` in order; returns the actions of every chunk.
fn run(o: &mut Observer, chunks: &[&[u8]]) -> Vec<Vec<Action>> {
    let mut calls = 0;
    let mut mk = || {
        calls += 1;
        NONCE
    };
    let out = chunks.iter().map(|c| o.feed(c, &mut mk)).collect();
    assert!(calls <= 1, "one nonce per launch");
    out
}

fn nonce_line() -> Vec<u8> {
    Message::Nonce(NONCE).encode().into_bytes()
}

#[test]
fn the_whole_protocol_in_order_with_noise() {
    let mut o = Observer::new();
    let a = run(
        &mut o,
        &[
            b"Firecracker noise\r\n",
            ready(1).as_bytes(),
            reply(1, &NONCE).as_bytes(),
            record(1).as_bytes(),
        ],
    );
    assert_eq!(a[0], vec![]);
    assert_eq!(
        a[1],
        vec![Action::SerialReady, Action::WriteNonce(nonce_line())]
    );
    assert_eq!(a[2], vec![Action::StrictReady]);
    assert_eq!(a[3], vec![Action::Record]);
    assert!(o.strict_ready());
    let lv = o.liveness();
    assert_eq!(lv.reply_boot_id, Some(id(1)));
    assert_eq!(lv.nonce.as_deref(), Some(hex(&NONCE).as_str()));
    assert_eq!(o.ready_boot_id, Some(id(1)));
    assert_eq!(o.record.as_ref().and_then(|r| r.boot_id), Some(id(1)));
    assert_eq!(o.protocol_error_count, 0);
    assert_eq!(o.noise_lines, 1);
    assert_eq!(
        o.noise_tail.back().map(String::as_str),
        Some("Firecracker noise")
    );
}

#[test]
fn lines_split_across_writes_byte_by_byte() {
    let mut o = Observer::new();
    let all = format!("{}{}{}", ready(2), reply(2, &NONCE), record(2));
    let mut actions = Vec::new();
    let mut mk = || NONCE;
    for b in all.as_bytes() {
        actions.extend(o.feed(std::slice::from_ref(b), &mut mk));
    }
    assert_eq!(
        actions,
        vec![
            Action::SerialReady,
            Action::WriteNonce(nonce_line()),
            Action::StrictReady,
            Action::Record
        ]
    );
    assert_eq!(o.protocol_error_count, 0);
}

#[test]
fn everything_in_one_chunk_keeps_the_order() {
    let mut o = Observer::new();
    let all = format!("noise\n{}{}", ready(3), record(3));
    let a = run(&mut o, &[all.as_bytes()]);
    assert_eq!(
        a[0],
        vec![
            Action::SerialReady,
            Action::WriteNonce(nonce_line()),
            Action::Record
        ]
    );
    assert!(!o.strict_ready(), "a record is not an answer");
}

#[test]
fn garbage_and_malformed_tc1_lines() {
    let mut o = Observer::new();
    run(
        &mut o,
        &[
            b"\xff\x00binary junk\n",
            b"TC1 ready boot_id=nope\n",
            b"TC1 hello\n",
            b"TC1 record garbage\n",
            b"TC1\n",
            b"xTC1 ready\n",
        ],
    );
    assert_eq!(o.protocol_error_count, 3, "{:?}", o.protocol_errors);
    assert_eq!(o.noise_lines, 3, "not starting with `TC1 `: noise");
    assert!(o.ready_boot_id.is_none());
    assert!(o.protocol_errors[0].contains("does not decode"));
}

#[test]
fn duplicate_lines_are_protocol_errors_and_change_nothing() {
    let mut o = Observer::new();
    let a = run(
        &mut o,
        &[
            ready(4).as_bytes(),
            ready(5).as_bytes(),
            reply(4, &NONCE).as_bytes(),
            reply(4, &NONCE).as_bytes(),
            record(4).as_bytes(),
            record(5).as_bytes(),
        ],
    );
    assert_eq!(a[1], vec![], "no second nonce");
    assert_eq!(a[3], vec![], "no second strict-ready");
    assert_eq!(a[5], vec![]);
    assert_eq!(o.protocol_error_count, 3, "{:?}", o.protocol_errors);
    assert_eq!(o.ready_boot_id, Some(id(4)));
    assert_eq!(o.record.as_ref().and_then(|r| r.boot_id), Some(id(4)));
    assert!(o.strict_ready());
}

#[test]
fn an_unverified_reply_is_the_answer_and_an_error() {
    let mut o = Observer::new();
    let a = run(
        &mut o,
        &[
            reply(6, &NONCE).as_bytes(),
            ready(6).as_bytes(),
            reply(6, &[9; NONCE_LEN]).as_bytes(),
            reply(6, &NONCE).as_bytes(),
        ],
    );
    assert_eq!(a[0], vec![], "a reply before the nonce");
    assert_eq!(a[2], vec![]);
    assert_eq!(
        a[3],
        vec![],
        "the first reply was the answer: no second chance"
    );
    assert!(!o.strict_ready());
    let lv = o.liveness();
    assert!(!lv.verified && lv.reply_boot_id.is_none() && lv.answer.is_some());
    assert_eq!(o.protocol_error_count, 3, "{:?}", o.protocol_errors);
    assert!(o.protocol_errors[0].contains("before the nonce"));
    assert!(o.protocol_errors[1].contains("does not verify"));
}

#[test]
fn a_reply_with_another_boot_id_is_not_strict_ready() {
    let mut o = Observer::new();
    run(&mut o, &[ready(7).as_bytes(), reply(8, &NONCE).as_bytes()]);
    assert!(!o.strict_ready());
    assert_eq!(o.protocol_error_count, 1);
    assert!(o.protocol_errors[0].contains("not the ready line's"));
}

#[test]
fn overlong_lines_noise_or_protocol_error() {
    let mut o = Observer::new();
    let mut long_tc1 = b"TC1 record ".to_vec();
    long_tc1.extend(std::iter::repeat_n(b'a', 10_000));
    long_tc1.push(b'\n');
    let mut long_noise = vec![b'z'; 10_000];
    long_noise.push(b'\n');
    // Split in odd places.
    let (x, y) = long_tc1.split_at(3);
    run(&mut o, &[x, y, &long_noise[..5000], &long_noise[5000..]]);
    assert_eq!(o.protocol_error_count, 1, "{:?}", o.protocol_errors);
    assert_eq!(o.noise_lines, 1);
    // The stream is usable afterwards.
    let a = run(&mut o, &[ready(9).as_bytes()]);
    assert_eq!(a[0][0], Action::SerialReady);
}

#[test]
fn the_end_of_the_stream() {
    let mut o = Observer::new();
    run(&mut o, &[b"TC1 ready boot_id=00000001-11"]);
    o.finish();
    assert_eq!(o.protocol_error_count, 1);
    let mut o = Observer::new();
    run(&mut o, &[b"partial noise"]);
    o.finish();
    assert_eq!((o.protocol_error_count, o.noise_lines), (0, 1));
}

#[test]
fn noise_is_bounded_and_error_texts_are_capped() {
    let mut o = Observer::new();
    for i in 0..1000 {
        run(&mut o, &[format!("noise {i}\n").as_bytes()]);
    }
    assert_eq!(o.noise_lines, 1000);
    assert_eq!(o.noise_tail.len(), NOISE_TAIL_LINES);
    assert_eq!(o.noise_tail.back().map(String::as_str), Some("noise 999"));
    for _ in 0..100 {
        run(&mut o, &[b"TC1 bogus\n"]);
    }
    assert_eq!(o.protocol_error_count, 100);
    assert_eq!(o.protocol_errors.len(), ReportCore::PROTOCOL_ERRORS_KEPT);
}
