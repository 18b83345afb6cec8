//! The module's argument encoder (kernel/crashring_debug_args.c), built
//! for user space: for any format of the conversions the kernel knows and
//! arguments of their types, what it encodes decodes (pstore-ring's
//! `DebugArgs`) to exactly the arguments the kernel's vsnprintf() would
//! have read, in order; and what does not fit is cut and said to be.

use proptest::prelude::*;
use pstore_ring::debug_args::{DebugArg, DebugArgs};
use pstore_ring::Endian;
use std::ffi::{c_char, CString};

extern "C" {
    fn crashring_test_encode(
        out: *mut u8,
        room: u32,
        fmt: *const c_char,
        args: *const u64,
        cut: *mut bool,
    ) -> usize;
}

/// One conversion, the argument the caller passes for it, and what the
/// encoder must record.
#[derive(Clone, Debug)]
enum Conv {
    /// `%[flags][width][.precision]<qualifier><d|i|u|o|x|X>`.
    Int {
        spec: String,
        qualifier: &'static str,
        value: u64,
    },
    /// `%*d`: the width, then the value.
    StarWidth {
        width: i32,
        value: u64,
    },
    Char(u8),
    /// `%.<precision>s` (or none).
    Str {
        precision: Option<u8>,
        value: String,
    },
    /// `%.*s`: the precision, then the string.
    StarStr {
        precision: i32,
        value: String,
    },
    /// `%p`, `%px`, `%pK`: an address.
    Ptr {
        ext: &'static str,
        value: u64,
    },
    Percent,
}

impl Conv {
    fn text(&self) -> String {
        match self {
            Conv::Int {
                spec, qualifier, ..
            } => format!("%{spec}{qualifier}d"),
            Conv::StarWidth { .. } => "%*d".into(),
            Conv::Char(_) => "%c".into(),
            Conv::Str { precision, .. } => match precision {
                Some(p) => format!("%.{p}s"),
                None => "%s".into(),
            },
            Conv::StarStr { .. } => "%.*s".into(),
            Conv::Ptr { ext, .. } => format!("%p{ext}"),
            Conv::Percent => "%%".into(),
        }
    }

    /// What is passed, each as a 64-bit slot (strings as pointers).
    fn pass(&self, strings: &mut Vec<CString>, out: &mut Vec<u64>) {
        let mut string = |s: &str| {
            strings.push(CString::new(s).unwrap());
            strings.last().unwrap().as_ptr() as u64
        };
        match self {
            Conv::Int { value, .. } | Conv::Ptr { value, .. } => out.push(*value),
            Conv::StarWidth { width, value } => out.extend([*width as u32 as u64, *value]),
            Conv::Char(c) => out.push(u64::from(*c)),
            Conv::Str { value, .. } => out.push(string(value)),
            Conv::StarStr { precision, value } => {
                out.push(*precision as u32 as u64);
                out.push(string(value));
            }
            Conv::Percent => {}
        }
    }

    /// What the encoder must record for it.
    fn want<'a>(&'a self, out: &mut Vec<DebugArg<'a>>) {
        let cut =
            |s: &'a str, p: Option<usize>| &s.as_bytes()[..p.map_or(s.len(), |p| p.min(s.len()))];
        match self {
            Conv::Int {
                qualifier, value, ..
            } => out.push(DebugArg::Int(match *qualifier {
                // int, short and char travel as int: its 32 bits.
                "hh" | "h" | "" => *value & 0xffff_ffff,
                _ => *value,
            })),
            Conv::StarWidth { width, value } => out.extend([
                DebugArg::Int(u64::from(*width as u32)),
                DebugArg::Int(*value & 0xffff_ffff),
            ]),
            Conv::Char(c) => out.push(DebugArg::Int(u64::from(*c))),
            Conv::Str { precision, value } => {
                out.push(DebugArg::Str(cut(value, precision.map(usize::from))))
            }
            Conv::StarStr { precision, value } => {
                out.push(DebugArg::Int(u64::from(*precision as u32)));
                // A negative '*' precision is 0.
                out.push(DebugArg::Str(cut(
                    value,
                    Some((*precision).max(0) as usize),
                )));
            }
            Conv::Ptr { value, .. } => out.push(DebugArg::Addr(*value)),
            Conv::Percent => {}
        }
    }
}

fn conv() -> impl Strategy<Value = Conv> {
    let spec = (
        proptest::sample::subsequence(vec!['-', '+', ' ', '#', '0'], 0..=3),
        proptest::option::of(0u8..40),
        proptest::option::of(0u8..40),
    )
        .prop_map(|(flags, w, p)| {
            let mut s: String = flags.into_iter().collect();
            if let Some(w) = w {
                s += &w.to_string();
            }
            if let Some(p) = p {
                s += &format!(".{p}");
            }
            s
        });
    prop_oneof![
        4 => (spec, proptest::sample::select(vec!["hh", "h", "", "l", "ll", "z", "t"]), any::<u64>())
            .prop_map(|(spec, qualifier, value)| Conv::Int { spec, qualifier, value }),
        1 => (-50i32..50, any::<u64>()).prop_map(|(width, value)| Conv::StarWidth { width, value }),
        1 => (1u8..=255).prop_map(Conv::Char),
        2 => (proptest::option::of(0u8..20), "[ -~]{0,40}")
            .prop_map(|(precision, value)| Conv::Str { precision, value }),
        1 => (-5i32..30, "[ -~]{0,40}").prop_map(|(precision, value)| Conv::StarStr { precision, value }),
        1 => (proptest::sample::select(vec!["", "x", "K"]), any::<u64>())
            .prop_map(|(ext, value)| Conv::Ptr { ext, value }),
        1 => Just(Conv::Percent),
    ]
}

/// Runs the C encoder over `convs` with `room` bytes: the bytes and
/// whether it said it cut them.
fn encode(convs: &[Conv], room: u32) -> (Vec<u8>, bool) {
    let fmt: String = convs.iter().map(|c| format!("<{}>", c.text())).collect();
    let fmt = CString::new(fmt).unwrap();
    let (mut strings, mut args) = (Vec::new(), Vec::new());
    for c in convs {
        c.pass(&mut strings, &mut args);
    }
    assert!(args.len() <= 8, "the shim passes 8 arguments");
    args.resize(8, 0);
    let mut out = vec![0u8; room as usize];
    let mut cut = false;
    // SAFETY: the format's conversions take exactly `args` (see `pass`),
    // every string among them lives in `strings`, and `out` holds `room`
    // bytes.
    let n = unsafe {
        crashring_test_encode(
            out.as_mut_ptr(),
            room,
            fmt.as_ptr(),
            args.as_ptr(),
            &mut cut,
        )
    };
    out.truncate(n);
    (out, cut)
}

/// At most 8 argument slots, as the shim passes.
fn convs() -> impl Strategy<Value = Vec<Conv>> {
    proptest::collection::vec(conv(), 0..5).prop_filter("over 8 argument slots", |cs| {
        let mut args = Vec::new();
        cs.iter().for_each(|c| c.pass(&mut Vec::new(), &mut args));
        args.len() <= 8
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// With room for everything, the recorded arguments are the ones the
    /// kernel reads, in order.
    #[test]
    fn it_records_what_the_kernel_reads(cs in convs()) {
        let (bytes, cut) = encode(&cs, 1024);
        prop_assert!(!cut);
        let got: Vec<DebugArg> = DebugArgs::new(&bytes, Endian::Little).collect::<Result<_, _>>().unwrap();
        let mut want = Vec::new();
        cs.iter().for_each(|c| c.want(&mut want));
        prop_assert_eq!(got, want);
    }

    /// With too little room it records a prefix of that (a string cut
    /// short at most), says it cut, and never writes past the room.
    #[test]
    fn what_does_not_fit_is_cut_and_said(cs in convs(), room in 0u32..120) {
        let (bytes, cut) = encode(&cs, room);
        prop_assert!(bytes.len() <= room as usize);
        let got: Vec<DebugArg> = DebugArgs::new(&bytes, Endian::Little).collect::<Result<_, _>>().unwrap();
        let mut want = Vec::new();
        cs.iter().for_each(|c| c.want(&mut want));
        prop_assert!(got.len() <= want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            match (g, w) {
                (DebugArg::Str(g), DebugArg::Str(w)) if i + 1 == got.len() => {
                    prop_assert!(w.starts_with(g));
                    prop_assert!(cut || g == w);
                }
                _ => prop_assert_eq!(g, w),
            }
        }
        if got.len() < want.len() {
            prop_assert!(cut, "{} of {} arguments and no cut", got.len(), want.len());
        }
    }
}
