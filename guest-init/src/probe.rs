//! The memory usability probe's pattern, fill and check: pure, host-testable.
//!
//! Every word of the probe's mapping gets [`probe_word`] of its index and is read back. The
//! pattern is affine in the index (base + index × an odd step, wrapping), so it is distinct
//! for every word of any mapping (an odd step is a bijection modulo 2^64) and a vector of
//! consecutive words advances by one addition. On x86-64 with AVX2 the fill and the check
//! move 32 bytes per instruction, which is what the probe costs where each instruction is
//! charged (the nested harness's virtual clock, docs/virtual-clock.md): about 2 instructions
//! per word instead of about 13. Every store and load is volatile either way, so the
//! compiler can neither drop a store nor answer a load from what it stored.

/// The pattern's value at index 0.
pub const PROBE_BASE: u64 = 0xa5a5_5a5a_c3c3_3c3c;
/// The pattern's step per word: odd, so index → word is a bijection modulo 2^64.
pub const PROBE_STEP: u64 = 0x9e37_79b9_7f4a_7c15;

/// The memory probe's pattern for the 8-byte word at `index`: distinct for every index, so a
/// stuck bit, a missing page or an aliased page reads back wrong.
pub fn probe_word(index: u64) -> u64 {
    PROBE_BASE.wrapping_add(index.wrapping_mul(PROBE_STEP))
}

/// Writes `probe_word(i)` to word `i` of `s`, for every `i`, with volatile stores.
pub fn probe_fill(s: &mut [u64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is available (detected just above, OS support included).
        unsafe { x86::fill_avx2(s) };
        return;
    }
    fill_scalar(s, 0);
}

/// The index of the first word of `s` that does not read back as `probe_word(index)`, with
/// volatile loads; None when every word does.
pub fn probe_check(s: &[u64]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is available (detected just above, OS support included).
        return unsafe { x86::check_avx2(s) };
    }
    check_scalar(s, 0)
}

/// Words `from..` of `s`, one at a time.
fn fill_scalar(s: &mut [u64], from: usize) {
    for (i, w) in s.iter_mut().enumerate().skip(from) {
        // SAFETY: `w` is a valid, aligned &mut u64.
        unsafe { std::ptr::write_volatile(w, probe_word(i as u64)) };
    }
}

/// Words `from..` of `s`, one at a time.
fn check_scalar(s: &[u64], from: usize) -> Option<usize> {
    s.iter()
        .enumerate()
        .skip(from)
        // SAFETY: `w` is a valid, aligned &u64.
        .find(|(i, w)| unsafe { std::ptr::read_volatile(*w) } != probe_word(*i as u64))
        .map(|(i, _)| i)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{check_scalar, fill_scalar, probe_word, PROBE_STEP};
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi64, _mm256_or_si256, _mm256_set1_epi64x, _mm256_setr_epi64x,
        _mm256_setzero_si256, _mm256_testz_si256, _mm256_xor_si256,
    };

    /// Words per vector.
    const LANES: usize = 4;
    /// Vectors per loop iteration.
    const UNROLL: usize = 4;
    /// Words per loop iteration.
    const BLOCK: usize = LANES * UNROLL;
    /// Words the check folds before it looks at its accumulator (one 4 KiB page).
    const CHECK_SPAN: usize = 512;

    /// Words before the first 32-byte-aligned one (the vectors' volatile accesses need it).
    fn lead(s: &[u64]) -> usize {
        (s.as_ptr().align_offset(32)).min(s.len())
    }

    /// The pattern of words `i .. i + 4`, one vector.
    #[target_feature(enable = "avx2")]
    unsafe fn at(i: usize) -> __m256i {
        let w = |k: usize| probe_word((i + k) as u64) as i64;
        _mm256_setr_epi64x(w(0), w(1), w(2), w(3))
    }

    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn fill_avx2(s: &mut [u64]) {
        let head = lead(s);
        let blocks = (s.len() - head) / BLOCK;
        let step = _mm256_set1_epi64x(PROBE_STEP.wrapping_mul(BLOCK as u64) as i64);
        let mut v = [at(head), at(head + 4), at(head + 8), at(head + 12)];
        // SAFETY: `head` ≤ len; the block loop below stays inside `s`.
        let base = unsafe { s.as_mut_ptr().add(head) }.cast::<__m256i>();
        for b in 0..blocks {
            for (k, x) in v.iter_mut().enumerate() {
                // SAFETY: vector `b * UNROLL + k` lies inside `s` (b < blocks) and is
                // 32-byte aligned (`base` is, by `lead`).
                unsafe { std::ptr::write_volatile(base.add(b * UNROLL + k), *x) };
                *x = _mm256_add_epi64(*x, step);
            }
        }
        fill_scalar(&mut s[..head], 0);
        fill_scalar(s, head + blocks * BLOCK);
    }

    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn check_avx2(s: &[u64]) -> Option<usize> {
        let head = lead(s);
        if let Some(i) = check_scalar(&s[..head], 0) {
            return Some(i);
        }
        let blocks = (s.len() - head) / BLOCK;
        let step = _mm256_set1_epi64x(PROBE_STEP.wrapping_mul(BLOCK as u64) as i64);
        let mut v = [at(head), at(head + 4), at(head + 8), at(head + 12)];
        // SAFETY: as in `fill_avx2`.
        let base = unsafe { s.as_ptr().add(head) }.cast::<__m256i>();
        let per_span = CHECK_SPAN / BLOCK;
        let mut b = 0;
        while b < blocks {
            let end = (b + per_span).min(blocks);
            let mut diff = _mm256_setzero_si256();
            for bb in b..end {
                for (k, x) in v.iter_mut().enumerate() {
                    // SAFETY: vector `bb * UNROLL + k` lies inside `s` and is aligned.
                    let got = unsafe { std::ptr::read_volatile(base.add(bb * UNROLL + k)) };
                    diff = _mm256_or_si256(diff, _mm256_xor_si256(got, *x));
                    *x = _mm256_add_epi64(*x, step);
                }
            }
            if _mm256_testz_si256(diff, diff) == 0 {
                // A word of this span differs: find which, one word at a time.
                // A word that read back wrong and then right is still a failed word: the
                // span's first word stands for it.
                let from = head + b * BLOCK;
                return check_scalar(&s[..head + end * BLOCK], from).or(Some(from));
            }
            b = end;
        }
        check_scalar(s, head + blocks * BLOCK)
    }
}
