//! The kernel's formatter against glibc's `snprintf()`, where the kernel
//! and C99 agree (an integration test: the library forbids `unsafe`,
//! and calling C takes it).

use proptest::prelude::*;
use pstore_ring::kprintf::{format, Arg, ArgError, Args, Pointers};

/// Arguments from a list.
struct List<'a>(std::vec::IntoIter<Arg<'a>>);

impl<'a> Args<'a> for List<'a> {
    fn next(&mut self) -> Result<Arg<'a>, ArgError> {
        self.0.next().ok_or(ArgError::Missing(0))
    }
}

/// A conversion where the kernel and C99 agree, and its argument.
#[derive(Debug, Clone)]
enum Case {
    Int {
        flags: String,
        width: Option<u8>,
        precision: Option<u8>,
        qualifier: &'static str,
        conversion: char,
        value: i64,
    },
    Char {
        left: bool,
        width: Option<u8>,
        value: u8,
    },
    Str {
        left: bool,
        width: Option<u8>,
        precision: Option<u8>,
        value: String,
    },
}

fn int_case() -> impl Strategy<Value = Case> {
    (
        proptest::sample::subsequence(vec!['-', '+', ' ', '#', '0'], 0..=5),
        proptest::option::of(0u8..30),
        proptest::option::of(0u8..30),
        proptest::sample::select(vec!["hh", "h", "", "l", "ll", "z", "t"]),
        proptest::sample::select(vec!['d', 'i', 'u', 'o', 'x', 'X']),
        prop_oneof![any::<i64>(), -300i64..300],
    )
        .prop_filter_map(
            "where C99 and the kernel differ",
            |(flags, width, precision, qualifier, conversion, value)| {
                let has = |c| flags.contains(&c);
                let zero = match qualifier {
                    "hh" => value as u8 == 0,
                    "h" => value as u16 == 0,
                    "" => value as u32 == 0,
                    _ => value == 0,
                };
                let differs = (precision.is_some() && has('0'))
                    || (has('#')
                        && (matches!(conversion, 'd' | 'i' | 'u') || zero || precision.is_some()))
                    || (precision == Some(0) && zero);
                (!differs).then(|| Case::Int {
                    flags: flags.into_iter().collect(),
                    width,
                    precision,
                    qualifier,
                    conversion,
                    value,
                })
            },
        )
}

fn case() -> impl Strategy<Value = Case> {
    prop_oneof![
        4 => int_case(),
        1 => (any::<bool>(), proptest::option::of(0u8..20), 1u8..=255).prop_map(|(left, width, value)| Case::Char { left, width, value }),
        1 => (any::<bool>(), proptest::option::of(0u8..20), proptest::option::of(0u8..20), "[ -~]{0,30}").prop_map(|(left, width, precision, value)| Case::Str { left, width, precision, value }),
    ]
}

fn spec_text(flags: &str, width: Option<u8>, precision: Option<u8>) -> String {
    let mut s = format!("%{flags}");
    if let Some(w) = width {
        s += &w.to_string();
    }
    if let Some(p) = precision {
        s += &format!(".{p}");
    }
    s
}

/// glibc's snprintf() of `fmt` with one argument.
fn glibc(fmt: &str, arg: &CArg) -> Vec<u8> {
    let fmt = std::ffi::CString::new(fmt).unwrap();
    let mut buf = vec![0u8; 4096];
    let (b, n, f) = (buf.as_mut_ptr().cast(), buf.len(), fmt.as_ptr());
    // SAFETY: the format has exactly one conversion, whose C type is
    // the argument's.
    let len = unsafe {
        match arg {
            CArg::Int(v) => libc::snprintf(b, n, f, *v),
            CArg::Long(v) => libc::snprintf(b, n, f, *v),
            CArg::Str(s) => libc::snprintf(b, n, f, s.as_ptr()),
        }
    };
    buf.truncate(usize::try_from(len).unwrap());
    buf
}

enum CArg {
    Int(libc::c_int),
    Long(libc::c_long),
    Str(std::ffi::CString),
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Where C99 and the kernel agree, the formatter agrees with glibc.
    #[test]
    fn agrees_with_glibc_where_the_kernel_agrees_with_c99(case in case()) {
        let (spec, arg, c_arg) = match &case {
            Case::Int { flags, width, precision, qualifier, conversion, value } => {
                let long = matches!(*qualifier, "l" | "ll" | "z" | "t");
                let c_arg = if long { CArg::Long(*value) } else { CArg::Int(*value as libc::c_int) };
                let raw = if long { *value as u64 } else { *value as libc::c_int as i64 as u64 };
                (format!("{}{qualifier}{conversion}", spec_text(flags, *width, *precision)), Arg::Int(raw), c_arg)
            }
            Case::Char { left, width, value } => (
                format!("{}c", spec_text(if *left { "-" } else { "" }, *width, None)),
                Arg::Int(u64::from(*value)),
                CArg::Int(libc::c_int::from(*value)),
            ),
            Case::Str { left, width, precision, value } => (
                format!("{}s", spec_text(if *left { "-" } else { "" }, *width, *precision)),
                Arg::Str(value.as_bytes()),
                CArg::Str(std::ffi::CString::new(value.as_str()).unwrap()),
            ),
        };
        let fmt = format!("<{spec}>");
        let ours = format(fmt.as_bytes(), &mut List(vec![arg].into_iter()), &Pointers::Raw, 4096).unwrap();
        let want = glibc(&fmt, &c_arg);
        prop_assert_eq!(ours.len, want.len());
        prop_assert_eq!(ours.text, want, "{}", fmt);
    }
}
