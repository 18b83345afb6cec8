//! VMCOREINFO, the note a kernel leaves for the readers of its dump: the
//! addresses of some symbols, the sizes of some structures and the
//! offsets of their fields, so that a reader needs no debuginfo
//! (`kernel/vmcore_info.c` and the `VMCOREINFO_*` macros of
//! `include/linux/vmcore_info.h`, which set each line's number base).

use std::collections::BTreeMap;

/// A missing or malformed VMCOREINFO entry.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InfoError {
    #[error("VMCOREINFO has no {0}")]
    Missing(String),
    #[error("VMCOREINFO's {key} is {value:?}, not {what}")]
    Invalid {
        key: String,
        value: String,
        what: &'static str,
    },
}

/// The note's `KEY=VALUE` lines, by key.
#[derive(Clone, Debug, Default)]
pub struct VmcoreInfo {
    entries: BTreeMap<String, String>,
}

impl VmcoreInfo {
    /// Reads the note's text. A key given twice keeps its first value, as
    /// makedumpfile's reader does; lines without `=` are passed over.
    pub fn parse(text: &str) -> VmcoreInfo {
        let mut entries = BTreeMap::new();
        for line in text.lines() {
            if let Some((key, value)) = line.split_once('=') {
                entries
                    .entry(key.to_string())
                    .or_insert_with(|| value.trim_end().to_string());
            }
        }
        VmcoreInfo { entries }
    }

    /// The text of `key`'s value.
    pub fn value(&self, key: &str) -> Result<&str, InfoError> {
        self.entries
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| InfoError::Missing(key.to_string()))
    }

    /// Whether the note has `key`.
    pub fn has(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// `SYMBOL(name)`: an address, in hex without `0x`.
    pub fn symbol(&self, name: &str) -> Result<u64, InfoError> {
        self.hex(&format!("SYMBOL({name})"))
    }

    /// `OFFSET(structure.field)`, in decimal.
    pub fn offset(&self, structure: &str, field: &str) -> Result<u64, InfoError> {
        self.decimal(&format!("OFFSET({structure}.{field})"))
    }

    /// `SIZE(structure)`, in decimal.
    pub fn size(&self, structure: &str) -> Result<u64, InfoError> {
        self.decimal(&format!("SIZE({structure})"))
    }

    /// `NUMBER(name)`, in decimal, signed (`%ld`).
    pub fn number(&self, name: &str) -> Result<i64, InfoError> {
        let key = format!("NUMBER({name})");
        let value = self.value(&key)?;
        value
            .parse()
            .map_err(|_| invalid(&key, value, "a decimal number"))
    }

    /// `NUMBER(name)` as an unsigned value: in hex with `0x` where the
    /// kernel prints it so (arm64's `kimage_voffset`, `PHYS_OFFSET`), else
    /// in decimal, a negative one taken as the kernel's unsigned use of it.
    pub fn unsigned(&self, name: &str) -> Result<u64, InfoError> {
        let key = format!("NUMBER({name})");
        let value = self.value(&key)?;
        match value.strip_prefix("0x") {
            Some(hex) => {
                u64::from_str_radix(hex, 16).map_err(|_| invalid(&key, value, "a hex number"))
            }
            None => self.number(name).map(|n| n as u64),
        }
    }

    /// `KERNELOFFSET`, the KASLR displacement of the kernel image, in hex.
    pub fn kernel_offset(&self) -> Result<u64, InfoError> {
        self.hex("KERNELOFFSET")
    }

    fn hex(&self, key: &str) -> Result<u64, InfoError> {
        let value = self.value(key)?;
        u64::from_str_radix(value, 16).map_err(|_| invalid(key, value, "a hex address"))
    }

    fn decimal(&self, key: &str) -> Result<u64, InfoError> {
        let value = self.value(key)?;
        value
            .parse()
            .map_err(|_| invalid(key, value, "a decimal number"))
    }
}

fn invalid(key: &str, value: &str, what: &'static str) -> InfoError {
    InfoError::Invalid {
        key: key.to_string(),
        value: value.to_string(),
        what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as a 6.12 x86-64 kernel writes them.
    const NOTE: &str = "OSRELEASE=6.12.117+deb12-amd64\n\
        PAGESIZE=4096\n\
        SYMBOL(prb)=ffffffff83a5c8e0\n\
        SIZE(printk_ringbuffer)=80\n\
        OFFSET(printk_ringbuffer.desc_ring)=0\n\
        NUMBER(phys_base)=-1040187392\n\
        KERNELOFFSET=1c000000\n\
        SYMBOL(prb)=0\n\
        garbage\n";

    #[test]
    fn each_kind_of_line_is_read_in_its_own_base() {
        let info = VmcoreInfo::parse(NOTE);
        assert_eq!(
            info.symbol("prb"),
            Ok(0xffff_ffff_83a5_c8e0),
            "the first kept"
        );
        assert_eq!(info.size("printk_ringbuffer"), Ok(80));
        assert_eq!(info.offset("printk_ringbuffer", "desc_ring"), Ok(0));
        assert_eq!(info.number("phys_base"), Ok(-1_040_187_392));
        assert_eq!(info.kernel_offset(), Ok(0x1c00_0000));
        assert_eq!(info.value("OSRELEASE"), Ok("6.12.117+deb12-amd64"));
        assert!(!info.has("garbage"));
    }

    #[test]
    fn an_unsigned_number_is_read_in_the_base_the_kernel_printed() {
        let note = VmcoreInfo::parse(
            "NUMBER(kimage_voffset)=0xffff9f877ee00000\nNUMBER(phys_base)=-1040187392\n\
             NUMBER(VA_BITS)=52\nNUMBER(bad)=0xzz\n",
        );
        assert_eq!(note.unsigned("kimage_voffset"), Ok(0xffff_9f87_7ee0_0000));
        assert_eq!(note.unsigned("phys_base"), Ok((-1040187392i64) as u64));
        assert_eq!(note.unsigned("VA_BITS"), Ok(52));
        assert!(matches!(
            note.unsigned("bad"),
            Err(InfoError::Invalid { .. })
        ));
    }

    #[test]
    fn a_missing_or_malformed_entry_is_named() {
        let info = VmcoreInfo::parse("SIZE(prb_desc)=0x18\n");
        assert_eq!(
            info.symbol("prb"),
            Err(InfoError::Missing("SYMBOL(prb)".into()))
        );
        let err = info.size("prb_desc").unwrap_err().to_string();
        assert_eq!(
            err,
            "VMCOREINFO's SIZE(prb_desc) is \"0x18\", not a decimal number"
        );
    }
}
