//! `cmdline.txt` (the commands a bundle records, which `verify` checks against its
//! configuration): `parse_cmdline_txt`, the shell-word splitter and the strict flag parsers
//! of the `truecold run` and `truecold-vmm boot` lines. None may panic; a split line's words
//! hold no unquoted blank.
#![no_main]
use libfuzzer_sys::fuzz_target;
use truecold_proof::cmdline::{parse_cmdline_txt, parse_run, parse_vmm, shell_words};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = parse_cmdline_txt(data) {
        let _ = (parse_run(&r.invocation_line), parse_vmm(&r.vmm_line));
    }
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        if let Some(words) = shell_words(line) {
            assert!(words.len() <= line.len());
        }
        let _ = (parse_run(line), parse_vmm(line));
    }
});
