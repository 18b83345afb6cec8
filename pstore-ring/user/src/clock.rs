//! The clock and the facts about the machine a region's header records.

/// `CLOCK_MONOTONIC` in nanoseconds: the kernel streams' clock
/// (`ktime_get_mono_fast_ns()`), read through the vDSO.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; both clocks exist on every
    // Linux, so the call cannot fail and `t` is always set.
    unsafe { libc::clock_gettime(id, &mut t) };
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

/// The monotonic time now and `CLOCK_REALTIME − CLOCK_MONOTONIC`, as the
/// header's `created_ns` and `wall_offset_ns`.
pub fn now_and_wall_offset() -> (u64, i64) {
    let mono = monotonic_ns();
    let wall = clock_ns(libc::CLOCK_REALTIME);
    (mono, wall.wrapping_sub(mono) as i64)
}

/// This boot's id, so a reader can tell which boot of the machine the
/// program ran in (the kernel's regions carry the same id); zeros when the
/// kernel does not say.
pub fn boot_id() -> [u8; 16] {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .and_then(|s| parse_uuid(s.trim()))
        .unwrap_or([0; 16])
}

/// `xxxxxxxx-xxxx-…` (32 hex digits, dashes anywhere) as 16 bytes.
fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let digits: Vec<u8> = s
        .bytes()
        .filter(|&b| b != b'-')
        .map(|b| (b as char).to_digit(16).map(|d| d as u8))
        .collect::<Option<_>>()?;
    let mut out = [0u8; 16];
    if digits.len() != 2 * out.len() {
        return None;
    }
    for (o, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *o = pair[0] << 4 | pair[1];
    }
    Some(out)
}

/// The kernel release and host name, from `uname`.
pub fn release_and_host() -> (String, String) {
    // SAFETY: utsname is plain bytes, valid zeroed, and uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return (String::new(), String::new());
    }
    let text = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (text(&u.release), text(&u.nodename))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_ids_parse_as_the_kernel_writes_them() {
        let id = parse_uuid("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0").unwrap();
        assert_eq!(id[0], 0x0f);
        assert_eq!(id[15], 0xf0);
        assert_eq!(parse_uuid("0f1e"), None);
        assert_eq!(parse_uuid("zz1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"), None);
    }

    #[test]
    fn the_monotonic_clock_is_the_kernels() {
        // Both sides read the same clock: one read lies between two others.
        let a = monotonic_ns();
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
        let b = t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64;
        assert!(a <= b && b <= monotonic_ns());
    }
}
