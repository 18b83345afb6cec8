//! A program's own categories ("drm", "input", "frame"...) and the word
//! that says which of them to record: the kernel's, in the control page
//! of the program's first stream, which `crashring debug select
//! user=NAME:CATEGORIES` rewrites while the program runs; or, for a
//! recorder in a file of its own, a word of the recorder's that holds the
//! program's defaults. Either way a disabled category costs a load and a
//! bit test, before anything is formatted.

use crate::kernel::{Grant, MAX_CATEGORIES};
use memmap2::Mmap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a program's categories were refused.
#[derive(Debug, thiserror::Error)]
#[error("category `{0}`: give at most 64, each 1 to 31 of [A-Za-z0-9_.-], all different")]
pub struct CategoryError(pub String);

/// Checks `names` as the kernel will.
pub(crate) fn check(names: &[&str]) -> Result<(), CategoryError> {
    if names.len() > MAX_CATEGORIES {
        return Err(CategoryError(names[MAX_CATEGORIES].to_string()));
    }
    for (i, name) in names.iter().enumerate() {
        let good = (1..32).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
            && !names[..i].contains(name);
        if !good {
            return Err(CategoryError(name.to_string()));
        }
    }
    Ok(())
}

/// What keeps the enabled word where it is.
enum Owner {
    /// The kernel's control page, mapped read-only.
    Kernel { _page: Mmap },
    /// The recorder's own word.
    Own { _word: Box<AtomicU64> },
}

/// The categories and their enabled word.
pub(crate) struct Switch {
    /// Points into `_owner`, which lives as long as the switch and never
    /// moves what it holds.
    word: &'static AtomicU64,
    names: Vec<String>,
    _owner: Owner,
}

impl Switch {
    /// A word of the recorder's own, holding `defaults`.
    pub fn own(names: &[&str], defaults: u64) -> Switch {
        let word = Box::new(AtomicU64::new(defaults & every(names.len())));
        // SAFETY: the box's contents stay put until the switch drops it.
        let word_ref: &'static AtomicU64 = unsafe { &*(&*word as *const AtomicU64) };
        Switch {
            word: word_ref,
            names: names.iter().map(|s| s.to_string()).collect(),
            _owner: Owner::Own { _word: word },
        }
    }

    /// The kernel's word for `grant`'s stream, `names` registered there.
    pub fn kernel(grant: &Grant, names: &[&str], defaults: u64) -> std::io::Result<Switch> {
        let page = grant.categories(names, defaults & every(names.len()))?;
        if page.len() < 8 {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
        // SAFETY: the mapping is page-aligned, at least 8 bytes, and stays
        // mapped until the switch drops it; the kernel writes the word
        // with single aligned stores, so reading it atomically is sound.
        let word: &'static AtomicU64 = unsafe { &*page.as_ptr().cast::<AtomicU64>() };
        Ok(Switch {
            word,
            names: names.iter().map(|s| s.to_string()).collect(),
            _owner: Owner::Kernel { _page: page },
        })
    }

    /// Whether category `index` is to be recorded now.
    #[inline]
    pub fn enabled(&self, index: u32) -> bool {
        index < 64 && self.word.load(Ordering::Relaxed) >> index & 1 != 0
    }

    /// The enabled word itself, for C's inline test.
    pub fn word(&self) -> &AtomicU64 {
        self.word
    }

    /// The index of the category called `name`.
    pub fn index(&self, name: &str) -> Option<u32> {
        self.names.iter().position(|n| n == name).map(|i| i as u32)
    }
}

/// The bits of `n` categories.
fn every(n: usize) -> u64 {
    match n {
        64.. => u64::MAX,
        n => (1 << n) - 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_as_the_kernel_checks_them() {
        assert!(check(&["drm", "input", "frame.late", "a_b-c"]).is_ok());
        for bad in [
            &["drm", "drm"][..],
            &[""],
            &["has space"],
            &["colon:"],
            &["comma,"],
            &["x".repeat(32).leak()],
        ] {
            assert!(check(bad).is_err(), "{bad:?}");
        }
        let many: Vec<String> = (0..65).map(|i| format!("c{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(check(&many[..64]).is_ok());
        assert!(check(&many).is_err());
    }

    #[test]
    fn an_own_word_holds_the_defaults_of_the_named_categories() {
        let s = Switch::own(&["a", "b", "c"], 0b1_0101);
        assert!(s.enabled(0) && !s.enabled(1) && s.enabled(2));
        // Bit 4 names no category: it is never enabled.
        assert!(!s.enabled(4) && !s.enabled(64) && !s.enabled(u32::MAX));
        assert_eq!((s.index("b"), s.index("d")), (Some(1), None));
        let all = Switch::own(&vec!["x"; 64], u64::MAX);
        assert!(all.enabled(63));
    }
}
