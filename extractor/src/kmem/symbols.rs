//! The kernel's text symbols by address, from a `System.map` or a copy of
//! `/proc/kallsyms` (the same `ADDRESS TYPE NAME [MODULE]` lines), for
//! naming the code addresses a trace holds (ftrace's function entries)
//! without debuginfo.
//!
//! The map gives each symbol where one kernel image put it: its link
//! address (`System.map`) or where some boot's KASLR moved it (a
//! `kallsyms` copy). The boot that wrote the trace had its own placement,
//! so a [`Symbolizer`] shifts every address by the difference, taken from
//! what that boot left: VMCOREINFO's symbols in a dump, or the `_text`
//! address ftrace saves beside a persistent buffer. The map must be of the
//! same kernel build; where two anchors can be compared and disagree, the
//! map is refused rather than names invented.

use super::vmcoreinfo::VmcoreInfo;
use std::fmt;
use std::path::Path;

/// The largest map read: a distribution kernel's kallsyms with every
/// module loaded is about 20 MiB.
const MAX_MAP_BYTES: u64 = 256 << 20;
/// Where an x86-64 kernel is linked to start (`__START_KERNEL_map` +
/// `LOAD_PHYSICAL_ADDR`), for the one anchor that is a KASLR offset
/// rather than an address (6.13 and 6.14's `kaslr_addr`).
const X86_64_LINK_TEXT: u64 = 0xffff_ffff_8100_0000;

/// Why a symbol map cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SymbolsError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}: larger than {MAX_MAP_BYTES} bytes, not a symbol map")]
    TooLarge(String),
    #[error("line {line}: not `ADDRESS TYPE NAME`: {text:?}")]
    Line { line: usize, text: String },
    #[error("no `_text` symbol: not a kernel's System.map or kallsyms")]
    NoText,
    #[error("every address is 0: kallsyms read without the right to see addresses (read /proc/kallsyms as root)")]
    Hidden,
    #[error("the map is of another kernel: {0}")]
    Mismatch(String),
    #[error("nothing tells where the writing boot put the kernel (no VMCOREINFO `SYMBOL(_stext)`, no `_text` saved by ftrace)")]
    NoAnchor,
}

/// One kernel image's text symbols, sorted by address.
#[derive(Debug)]
pub struct SymbolMap {
    /// Every symbol of the image (not a module's), by name, for anchors.
    all: std::collections::HashMap<String, u64>,
    /// Text symbols (`t`, `T`, `w`, `W`), by address.
    text: Vec<(u64, String)>,
    /// `_text` .. `_etext` (or the last text symbol): where a name found
    /// is the right one.
    bounds: (u64, u64),
}

impl SymbolMap {
    pub fn load(path: &Path) -> Result<SymbolMap, SymbolsError> {
        let name = path.display().to_string();
        let read = |source| SymbolsError::Read {
            path: name.clone(),
            source,
        };
        // kallsyms says it is 0 bytes long: read up to the bound instead.
        let mut text = String::new();
        use std::io::Read as _;
        std::fs::File::open(path)
            .map_err(read)?
            .take(MAX_MAP_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(read)?;
        if text.len() as u64 > MAX_MAP_BYTES {
            return Err(SymbolsError::TooLarge(name));
        }
        SymbolMap::parse(&text)
    }

    pub fn parse(text: &str) -> Result<SymbolMap, SymbolsError> {
        let mut all = std::collections::HashMap::new();
        let mut symbols = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let mut words = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (words.next(), words.next(), words.next())
            else {
                if line.trim().is_empty() {
                    continue;
                }
                return Err(SymbolsError::Line {
                    line: i + 1,
                    text: line.chars().take(80).collect(),
                });
            };
            let addr = u64::from_str_radix(addr, 16).map_err(|_| SymbolsError::Line {
                line: i + 1,
                text: line.chars().take(80).collect(),
            })?;
            // `[module]`: placed by that boot's module loader, not by
            // the image's offset.
            if words.next().is_some() {
                continue;
            }
            all.entry(name.to_string()).or_insert(addr);
            if matches!(kind, "t" | "T" | "w" | "W") {
                symbols.push((addr, name.to_string()));
            }
        }
        let start = *all.get("_text").ok_or(SymbolsError::NoText)?;
        if all.values().all(|&a| a == 0) {
            return Err(SymbolsError::Hidden);
        }
        symbols.sort();
        let end = all
            .get("_etext")
            .copied()
            .or_else(|| symbols.last().map(|s| s.0 + 1))
            .unwrap_or(start);
        Ok(SymbolMap {
            all,
            text: symbols,
            bounds: (start, end),
        })
    }

    /// The address the map gives `name`.
    pub fn address(&self, name: &str) -> Option<u64> {
        self.all.get(name).copied()
    }

    /// The text symbol `addr` (in the map's placement) is in, and how far.
    fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        if addr < self.bounds.0 || addr >= self.bounds.1 {
            return None;
        }
        let at = self.text.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (start, name) = &self.text[at];
        Some((name, addr - start))
    }
}

/// What the writing boot left of where it put the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelText {
    /// Where it put a symbol of its image: 6.12's descriptor saves the
    /// address of `rb_meta_init_text_addr` (the function that saves
    /// it), 6.15+'s scratch area `_text`'s.
    Symbol { name: &'static str, addr: u64 },
    /// The KASLR offset (6.13 and 6.14's `kaslr_addr`).
    KaslrOffset(u64),
}

/// A map shifted to where one boot put the kernel.
#[derive(Debug)]
pub struct Symbolizer<'a> {
    map: &'a SymbolMap,
    /// The writing boot's address minus the map's, wrapping.
    shift: u64,
    /// What the shift was taken from, for the reader.
    pub anchor: String,
}

impl<'a> Symbolizer<'a> {
    /// `map` shifted by the best anchor there is: the symbols of a dump's
    /// VMCOREINFO (`_stext`, checked against `init_uts_ns`), else `text`.
    pub fn new(
        map: &'a SymbolMap,
        info: Option<&VmcoreInfo>,
        text: Option<KernelText>,
    ) -> Result<Symbolizer<'a>, SymbolsError> {
        let from_info = |name: &str| {
            let runtime = info?.symbol(name).ok()?;
            Some(runtime.wrapping_sub(map.address(name)?))
        };
        let from_text = match text {
            Some(KernelText::Symbol { name, addr }) => {
                let at = map.address(name).ok_or_else(|| {
                    SymbolsError::Mismatch(format!("it has no {name}, which ftrace saved"))
                })?;
                Some((addr.wrapping_sub(at), format!("ftrace's saved {name}")))
            }
            Some(KernelText::KaslrOffset(off)) => {
                let map_offset = map.bounds.0.wrapping_sub(X86_64_LINK_TEXT);
                Some((
                    off.wrapping_sub(map_offset),
                    "ftrace's saved KASLR offset".to_string(),
                ))
            }
            None => None,
        };
        let (shift, anchor) = match from_info("_stext") {
            Some(shift) => {
                if let Some(other) = from_info("init_uts_ns").filter(|&s| s != shift) {
                    return Err(SymbolsError::Mismatch(format!(
                        "VMCOREINFO's _stext puts it {shift:#x} from the map, its init_uts_ns {other:#x}"
                    )));
                }
                (shift, "VMCOREINFO's _stext".to_string())
            }
            None => from_text.clone().ok_or(SymbolsError::NoAnchor)?,
        };
        if let Some((other, what)) = from_text.filter(|(s, _)| *s != shift) {
            return Err(SymbolsError::Mismatch(format!(
                "{anchor} puts it {shift:#x} from the map, {what} {other:#x}"
            )));
        }
        Ok(Symbolizer { map, shift, anchor })
    }

    /// `addr` of the writing boot as `name+0xOFF` (`name` at its start),
    /// or the address itself outside the kernel image's text (a module's,
    /// or not code).
    pub fn name(&self, addr: u64) -> Named<'_> {
        Named {
            found: self.map.lookup(addr.wrapping_sub(self.shift)),
            addr,
        }
    }
}

/// An address said by its symbol where there is one.
pub struct Named<'a> {
    found: Option<(&'a str, u64)>,
    addr: u64,
}

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.found {
            Some((name, 0)) => f.write_str(name),
            Some((name, off)) => write!(f, "{name}+{off:#x}"),
            None => write!(f, "{:#x}", self.addr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as Debian's 6.12 kallsyms gives them, on a boot whose KASLR
    /// offset is 0x1c000000; one a module's.
    const KALLSYMS: &str = "ffffffff9d000000 T _text\n\
        ffffffff9d000000 T _stext\n\
        ffffffff9d3f0e50 t rb_meta_init_text_addr\n\
        ffffffff9d6a1230 t sysrq_handle_crash\n\
        ffffffff9d6a1a40 T __handle_sysrq\n\
        ffffffff9e000000 T _etext\n\
        ffffffff9f3cb2a0 D init_uts_ns\n\
        ffffffffc0a01000 t drm_ioctl\t[drm]\n";

    fn map() -> SymbolMap {
        SymbolMap::parse(KALLSYMS).expect("kallsyms lines")
    }

    #[test]
    fn an_address_of_another_boot_is_named_by_the_shift_from_its_text() {
        let map = map();
        // The writing boot put _text 0x2000000 lower.
        let text = KernelText::Symbol {
            name: "_text",
            addr: 0xffff_ffff_9b00_0000,
        };
        let s = Symbolizer::new(&map, None, Some(text)).expect("an anchor");
        assert_eq!(
            s.name(0xffff_ffff_9b6a_1234).to_string(),
            "sysrq_handle_crash+0x4"
        );
        assert_eq!(s.name(0xffff_ffff_9b6a_1a40).to_string(), "__handle_sysrq");
        // Past _etext, and a module's address: said as they are.
        assert_eq!(
            s.name(0xffff_ffff_9c00_0010).to_string(),
            "0xffffffff9c000010"
        );
        assert_eq!(
            s.name(0xffff_ffff_c0a0_1000).to_string(),
            "0xffffffffc0a01000"
        );
        assert_eq!(
            map.address("drm_ioctl"),
            None,
            "a module's symbol is not the image's"
        );
    }

    #[test]
    fn vmcoreinfo_anchors_and_refuses_a_map_of_another_build() {
        let map = map();
        let info = VmcoreInfo::parse(
            "SYMBOL(_stext)=ffffffffa1000000\nSYMBOL(init_uts_ns)=ffffffffa33cb2a0\n",
        );
        let s = Symbolizer::new(&map, Some(&info), None).expect("VMCOREINFO");
        assert_eq!(s.anchor, "VMCOREINFO's _stext");
        assert_eq!(
            s.name(0xffff_ffff_a16a_1230).to_string(),
            "sysrq_handle_crash"
        );
        // init_uts_ns elsewhere: the data moved against the text.
        let other = VmcoreInfo::parse(
            "SYMBOL(_stext)=ffffffffa1000000\nSYMBOL(init_uts_ns)=ffffffffa33cc2a0\n",
        );
        assert!(matches!(
            Symbolizer::new(&map, Some(&other), None),
            Err(SymbolsError::Mismatch(_))
        ));
        // 6.12's saved function where VMCOREINFO puts it, then elsewhere.
        let saved = |addr| KernelText::Symbol {
            name: "rb_meta_init_text_addr",
            addr,
        };
        let s = Symbolizer::new(&map, Some(&info), Some(saved(0xffff_ffff_a13f_0e50)))
            .expect("anchors that agree");
        assert_eq!(s.anchor, "VMCOREINFO's _stext");
        assert!(matches!(
            Symbolizer::new(&map, Some(&info), Some(saved(0xffff_ffff_a23f_0e50))),
            Err(SymbolsError::Mismatch(_))
        ));
        // A map without the symbol ftrace saved.
        let bare =
            SymbolMap::parse("ffffffff81000000 T _text\nffffffff81000100 T f\n").expect("a map");
        assert!(matches!(
            Symbolizer::new(&bare, None, Some(saved(0xffff_ffff_a13f_0e50))),
            Err(SymbolsError::Mismatch(_))
        ));
    }

    #[test]
    fn a_kaslr_offset_is_taken_against_the_link_address() {
        let map = map();
        let s = Symbolizer::new(&map, None, Some(KernelText::KaslrOffset(0x1e00_0000)))
            .expect("an anchor");
        assert_eq!(
            s.name(0xffff_ffff_9f6a_1230).to_string(),
            "sysrq_handle_crash"
        );
    }

    #[test]
    fn what_cannot_name_anything_is_refused() {
        assert!(matches!(
            SymbolMap::parse("ffffffffffffffff B The real System.map is in the -dbg package\n"),
            Err(SymbolsError::NoText)
        ));
        assert!(matches!(
            SymbolMap::parse("0000000000000000 T _text\n0000000000000000 t f\n"),
            Err(SymbolsError::Hidden)
        ));
        assert!(matches!(
            SymbolMap::parse("ffffffff81000000 T _text\nnot a line\n"),
            Err(SymbolsError::Line { line: 2, .. })
        ));
        assert!(matches!(
            Symbolizer::new(&map(), None, None),
            Err(SymbolsError::NoAnchor)
        ));
    }
}
