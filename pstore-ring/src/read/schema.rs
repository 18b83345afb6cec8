//! The schema table as a reader holds it: owned, indexed by type id, with
//! the built-ins filled in wherever the region's table is silent or damaged.

use crate::endian::Endian;
use crate::layout::*;
use crate::schema::{decode_field, FieldKind, Value, BUILTIN_EVENTS};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::ops::Range;
use zerocopy::FromBytes;

/// An event type as a reader knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventType {
    pub id: u8,
    pub name: String,
    pub fields: Vec<Field>,
    /// `": name: "`, the text between a line's time and its fields, made
    /// once so that text output writes it in one piece.
    pub heading: String,
}

impl EventType {
    pub fn new(id: u8, name: String, fields: Vec<Field>) -> EventType {
        EventType {
            id,
            heading: alloc::format!(": {name}: "),
            name,
            fields,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub kind: FieldKind,
    /// `" name="`, for text output (see [`EventType::heading`]).
    pub label: String,
}

impl Field {
    pub fn new(name: String, kind: FieldKind) -> Field {
        Field {
            label: alloc::format!(" {name}="),
            name,
            kind,
        }
    }
}

/// Why a schema table could not be used; the offset is from the start of
/// the table.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("schema table is {have} bytes, its header says {need}")]
    Truncated { need: usize, have: usize },
    #[error("schema table `magic` is {0:#010x}")]
    BadMagic(u32),
    #[error("schema table CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc { stored: u32, computed: u32 },
    #[error("schema table `count` {0} exceeds 256")]
    TooMany(u32),
    #[error("schema table entry at offset {offset}: {what}")]
    BadEntry { offset: usize, what: &'static str },
    #[error("schema table header is not in the input: the dump excluded or lost it")]
    HeaderAbsent,
    #[error("schema table entry {index} at offset {offset} is not in the input: the dump excluded or lost it")]
    EntryAbsent { index: u32, offset: usize },
    #[error("schema table bytes after its entries, from offset {offset}, are not in the input: the dump excluded or lost them, so its CRC cannot be checked")]
    RestAbsent { offset: usize },
}

/// Every event type a region's records can be decoded with.
#[derive(Clone, Debug)]
pub struct Schema {
    types: Vec<Option<EventType>>,
}

/// A stored name as an identifier (FORMAT.md section 6): every output
/// format uses names as keys or identifiers, and a hostile one must not
/// break a line or a metadata file.
/// `name`, or with `_2`, `_3`... after it, to differ from every field's
/// name in `fields`: outputs key values by name (a JSON object, a CTF
/// structure, a tracefs format), and two names can read alike (`a.b` and
/// `a_b`) or repeat.
fn unique_in(name: String, fields: &[Field]) -> String {
    let taken = |n: &str| fields.iter().any(|f| f.name == n);
    if !taken(&name) {
        return name;
    }
    (2..)
        .map(|n| format!("{name}_{n}"))
        .find(|candidate| !taken(candidate))
        .unwrap_or(name)
}

fn name_of(raw: &[u8]) -> String {
    let end = memchr::memchr(0, raw).unwrap_or(raw.len());
    let name: String = raw[..end]
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() || b == b'_' {
                b as char
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        "_".into()
    } else {
        name
    }
}

impl Schema {
    /// Just the built-in event types.
    pub fn builtin() -> Schema {
        let mut types: Vec<Option<EventType>> = (0..256).map(|_| None).collect();
        for def in BUILTIN_EVENTS {
            types[def.id as usize] = Some(EventType::new(
                def.id,
                def.name.into(),
                def.fields
                    .iter()
                    .map(|f| Field::new(f.name.into(), f.kind))
                    .collect(),
            ));
        }
        Schema { types }
    }

    /// The built-ins overlaid with every entry of a region's schema table.
    pub fn parse(table: &[u8], e: Endian, checksum: Checksum) -> Result<Schema, SchemaError> {
        Schema::parse_with_absent(table, e, checksum, &|_| false)
    }

    /// [`Self::parse`] of a table some of whose bytes the input may not
    /// supply: `absent` says whether any byte of a range of the table is
    /// one. The CRC covers the whole table, so a table with such bytes is
    /// never used; the error names its first part that touches them, the
    /// entries before it walked as their `field_count`s say.
    pub(crate) fn parse_with_absent(
        table: &[u8],
        e: Endian,
        checksum: Checksum,
        absent: &dyn Fn(Range<usize>) -> bool,
    ) -> Result<Schema, SchemaError> {
        let have = table.len();
        let (hdr, _) =
            SchemaHeader::read_from_prefix(table).map_err(|_| SchemaError::Truncated {
                need: SCHEMA_HEADER_SIZE,
                have,
            })?;
        if absent(0..SCHEMA_HEADER_SIZE) {
            return Err(SchemaError::HeaderAbsent);
        }
        if hdr.magic.get(e) != SCHEMA_MAGIC {
            return Err(SchemaError::BadMagic(hdr.magic.get(e)));
        }
        let need = hdr.size.get(e) as usize;
        let Some(table) = table.get(..need).filter(|_| need >= SCHEMA_HEADER_SIZE) else {
            return Err(SchemaError::Truncated { need, have });
        };
        // A CRC over placeholder bytes says nothing: the walk below names
        // the entry that lies in them instead.
        let holed = absent(SCHEMA_HEADER_SIZE..need);
        if !holed {
            let computed = checksum.crc(&[&table[..12], &table[SCHEMA_HEADER_SIZE..]]);
            if computed != hdr.crc.get(e) {
                return Err(SchemaError::Crc {
                    stored: hdr.crc.get(e),
                    computed,
                });
            }
        }
        let count = hdr.count.get(e);
        if count > MAX_EVENT_TYPES {
            return Err(SchemaError::TooMany(count));
        }
        let mut schema = Schema::builtin();
        let mut at = SCHEMA_HEADER_SIZE;
        for index in 0..count {
            let bad = |what| SchemaError::BadEntry { offset: at, what };
            let entry_absent = |end: usize| {
                absent(at..end.min(need)).then_some(SchemaError::EntryAbsent { index, offset: at })
            };
            if let Some(err) = entry_absent(at + EVENT_DESC_SIZE) {
                return Err(err);
            }
            let desc = table
                .get(at..)
                .and_then(|r| EventDesc::read_from_prefix(r).ok())
                .map(|(d, _)| d)
                .ok_or(bad("event descriptor runs past the table"))?;
            let id = desc.type_id.get(e);
            let Ok(id8) = u8::try_from(id) else {
                return Err(bad("`type_id` exceeds 255"));
            };
            if id8 < FIRST_EVENT_TYPE {
                return Err(bad("`type_id` is reserved for the format"));
            }
            let nfields = desc.field_count.get(e);
            if nfields > MAX_FIELDS {
                return Err(bad("`field_count` exceeds 32"));
            }
            if let Some(err) =
                entry_absent(at + EVENT_DESC_SIZE + nfields as usize * FIELD_DESC_SIZE)
            {
                return Err(err);
            }
            let mut fields = Vec::with_capacity(nfields as usize);
            let mut fat = at + EVENT_DESC_SIZE;
            for _ in 0..nfields {
                let fbad = |what| SchemaError::BadEntry { offset: fat, what };
                let fd = table
                    .get(fat..)
                    .and_then(|r| FieldDesc::read_from_prefix(r).ok())
                    .map(|(d, _)| d)
                    .ok_or(fbad("field descriptor runs past the table"))?;
                let kind = FieldKind::from_descriptor(fd.kind, fd.size.get(e))
                    .ok_or(fbad("field `kind` or `size` is invalid"))?;
                let name = unique_in(name_of(&fd.name), &fields);
                fields.push(Field::new(name, kind));
                fat += FIELD_DESC_SIZE;
            }
            schema.types[id8 as usize] = Some(EventType::new(id8, name_of(&desc.name), fields));
            at = fat;
        }
        if holed {
            return Err(SchemaError::RestAbsent { offset: at });
        }
        Ok(schema)
    }

    pub fn get(&self, id: u8) -> Option<&EventType> {
        self.types.get(id as usize).and_then(Option::as_ref)
    }

    /// Every known type, by id.
    pub fn types(&self) -> impl Iterator<Item = &EventType> {
        self.types.iter().flatten()
    }
}

/// The values of one payload; see [`EventType::values`].
pub struct Values<'s, 'p> {
    fields: core::iter::Enumerate<core::slice::Iter<'s, Field>>,
    payload: &'p [u8],
    at: usize,
    e: Endian,
    failed: bool,
}

impl<'p> Iterator for Values<'_, 'p> {
    type Item = Result<Value<'p>, usize>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let (i, f) = self.fields.next()?;
        match decode_field(f.kind, self.payload, self.at, self.e) {
            Some((v, next)) => {
                self.at = next;
                Some(Ok(v))
            }
            None => {
                self.failed = true;
                Some(Err(i))
            }
        }
    }
}

impl EventType {
    /// Decodes `payload` field by field; `Err(i)` names the first field
    /// that does not fit.
    pub fn decode<'p>(&self, payload: &'p [u8], e: Endian) -> Result<Vec<Value<'p>>, usize> {
        self.values(payload, e).collect()
    }

    /// [`Self::decode`] into `values`, emptied first: a writer decoding
    /// event after event reuses one buffer rather than allocating one
    /// per event (which, on every core at once, costs more in the
    /// allocator than the decoding).
    pub fn decode_into<'p>(
        &self,
        payload: &'p [u8],
        e: Endian,
        values: &mut Vec<Value<'p>>,
    ) -> Result<(), usize> {
        values.clear();
        for v in self.values(payload, e) {
            values.push(v?);
        }
        Ok(())
    }

    /// Decodes `payload` lazily, field by field, without allocating; the
    /// first field that does not fit yields `Err(its index)` and ends it.
    pub fn values<'s, 'p>(&'s self, payload: &'p [u8], e: Endian) -> Values<'s, 'p> {
        Values {
            fields: self.fields.iter().enumerate(),
            payload,
            at: 0,
            e,
            failed: false,
        }
    }

    /// The index of the first field of `payload` that does not fit, if any.
    pub fn misfit(&self, payload: &[u8], e: Endian) -> Option<usize> {
        self.values(payload, e).find_map(Result::err)
    }

    /// Whether `payload` (with its record padding) is exactly one encoded
    /// event of this type: every field fits and at most three padding
    /// bytes remain.
    pub fn matches(&self, payload: &[u8], e: Endian) -> bool {
        let mut at = 0;
        for f in &self.fields {
            match decode_field(f.kind, payload, at, e) {
                Some((_, next)) => at = next,
                None => return false,
            }
        }
        payload.len() - at < RECORD_ALIGN
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{write_table, EventDef, FieldDef, EVENT_PRINTK};

    #[test]
    fn reads_back_what_the_writer_wrote_in_both_orders() {
        let custom = [EventDef {
            id: 40,
            name: "drm_vblank",
            fields: &[
                FieldDef {
                    name: "crtc",
                    kind: FieldKind::U32,
                },
                FieldDef {
                    name: "seq",
                    kind: FieldKind::U64,
                },
            ],
        }];
        for e in [Endian::Little, Endian::Big] {
            let mut buf = [0u8; 4096];
            let n = write_table(&custom, e, &mut buf).unwrap();
            let s = Schema::parse(&buf[..n], e, Checksum::WRITTEN).unwrap();
            assert_eq!(s.get(40).unwrap().name, "drm_vblank");
            assert_eq!(s.get(40).unwrap().fields[1].kind, FieldKind::U64);
            assert_eq!(s.get(EVENT_PRINTK).unwrap().fields.len(), 5);
            assert_eq!(s.types().count(), BUILTIN_EVENTS.len() + 1);
        }
    }

    #[test]
    fn names_are_read_as_identifiers() {
        let field = |name| FieldDef {
            name,
            kind: FieldKind::U32,
        };
        let custom = [EventDef {
            id: 41,
            name: "drm vblank\n\"",
            fields: &[
                field("crtc="),
                field("a.b"),
                field("a_b"),
                field("crtc_"),
                field("a_b_2"),
            ],
        }];
        let mut buf = [0u8; 4096];
        let n = write_table(&custom, Endian::Little, &mut buf).unwrap();
        let s = Schema::parse(&buf[..n], Endian::Little, Checksum::WRITTEN).unwrap();
        assert_eq!(s.get(41).unwrap().name, "drm_vblank__");
        let names: Vec<&str> = s.get(41).unwrap().fields.iter().map(|f| &*f.name).collect();
        // Names that read alike are made to differ.
        assert_eq!(names, ["crtc_", "a_b", "a_b_2", "crtc__2", "a_b_2_2"]);
        assert_eq!(name_of(b"\0junk"), "_");
    }

    /// A schema table of `entries` (type id, field count; every field a
    /// `u8`) built by hand, since the writer refuses tables past the
    /// limits.
    fn raw_table(entries: &[(u16, u16)], e: Endian) -> Vec<u8> {
        use crate::endian::{U16, U32};
        use zerocopy::IntoBytes;
        let mut table = vec![0u8; SCHEMA_HEADER_SIZE];
        for &(id, fields) in entries {
            let mut desc = EventDesc {
                type_id: U16::new(e, id),
                field_count: U16::new(e, fields),
                flags: U32::new(e, 0),
                name: [0; 32],
            };
            desc.name[0] = b'e';
            table.extend_from_slice(desc.as_bytes());
            for _ in 0..fields {
                let mut fd = FieldDesc {
                    name: [0; 20],
                    kind: FieldKind::U8.code(),
                    reserved: 0,
                    size: U16::new(e, 1),
                };
                fd.name[0] = b'f';
                table.extend_from_slice(fd.as_bytes());
            }
        }
        let mut hdr = SchemaHeader {
            magic: U32::new(e, SCHEMA_MAGIC),
            count: U32::new(e, entries.len() as u32),
            size: U32::new(e, table.len() as u32),
            crc: U32::new(e, 0),
        };
        hdr.crc = U32::new(
            e,
            crc32(&[&hdr.as_bytes()[..12], &table[SCHEMA_HEADER_SIZE..]]),
        );
        table[..SCHEMA_HEADER_SIZE].copy_from_slice(hdr.as_bytes());
        table
    }

    #[test]
    fn a_table_of_256_entries_is_read_and_one_of_257_refused() {
        // Ids 16..=255 make 240 types, so a table this long repeats ids;
        // the reader lets each entry replace the definition before it, as
        // an entry replaces a built-in's (FORMAT.md section 6).
        let entries = |n: u16| (0..n).map(|i| (16 + i % 240, i / 240)).collect::<Vec<_>>();
        for e in [Endian::Little, Endian::Big] {
            let s = Schema::parse(&raw_table(&entries(256), e), e, Checksum::WRITTEN).unwrap();
            assert_eq!(s.get(16).unwrap().fields.len(), 1, "the later entry wins");
            assert_eq!(s.get(32).unwrap().fields.len(), 0);
            assert_eq!(
                Schema::parse(&raw_table(&entries(257), e), e, Checksum::WRITTEN).err(),
                Some(SchemaError::TooMany(257))
            );
        }
    }

    #[test]
    fn an_event_type_of_32_fields_is_read_and_one_of_33_refused() {
        for e in [Endian::Little, Endian::Big] {
            let s = Schema::parse(&raw_table(&[(40, 32)], e), e, Checksum::WRITTEN).unwrap();
            assert_eq!(s.get(40).unwrap().fields.len(), 32);
            // The 33 field descriptors are all there: only the count is
            // wrong.
            assert_eq!(
                Schema::parse(&raw_table(&[(40, 33)], e), e, Checksum::WRITTEN).err(),
                Some(SchemaError::BadEntry {
                    offset: SCHEMA_HEADER_SIZE,
                    what: "`field_count` exceeds 32"
                })
            );
        }
    }

    /// Text output and trace.dat conversion show a payload raw, naming
    /// the field where it ends, when `misfit` finds one.
    #[test]
    fn misfit_names_the_first_field_a_payload_cannot_hold() {
        let t = EventType::new(
            40,
            "t".into(),
            vec![
                Field::new("a".into(), FieldKind::U32),
                Field::new("b".into(), FieldKind::U64),
                Field::new("c".into(), FieldKind::Str),
            ],
        );
        let e = Endian::Big;
        let mut whole = vec![0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 3];
        whole.extend_from_slice(b"abc");
        assert_eq!(t.misfit(&whole, e), None);
        assert_eq!(t.misfit(&[], e), Some(0));
        assert_eq!(t.misfit(&whole[..11], e), Some(1));
        assert_eq!(t.misfit(&whole[..16], e), Some(2));
        for cut in 0..whole.len() {
            assert_eq!(t.misfit(&whole[..cut], e), t.decode(&whole[..cut], e).err());
        }
    }

    /// One buffer decodes payload after payload exactly as `decode`,
    /// whatever an earlier one left in it.
    #[test]
    fn decode_into_reuses_a_buffer_and_decodes_as_decode() {
        let t = EventType::new(
            40,
            "t".into(),
            vec![
                Field::new("a".into(), FieldKind::U32),
                Field::new("c".into(), FieldKind::Str),
            ],
        );
        let e = Endian::Little;
        let whole = [7, 0, 0, 0, 2, 0, b'h', b'i'];
        assert_eq!(t.decode(&whole, e).map(|v| v.len()), Ok(2));
        let mut values = Vec::new();
        for cut in (0..=whole.len()).rev().chain(0..=whole.len()) {
            let into = t.decode_into(&whole[..cut], e, &mut values);
            match t.decode(&whole[..cut], e) {
                Ok(want) => assert_eq!((into, &values), (Ok(()), &want), "cut {cut}"),
                Err(at) => assert_eq!(into, Err(at), "cut {cut}"),
            }
        }
    }

    #[test]
    fn a_table_with_absent_bytes_names_its_part_in_them_never_its_crc() {
        let e = Endian::Little;
        let mut buf = [0u8; 4096];
        let n = write_table(&[], e, &mut buf).unwrap();
        let first = SCHEMA_HEADER_SIZE;
        let second = first + EVENT_DESC_SIZE + BUILTIN_EVENTS[0].fields.len() * FIELD_DESC_SIZE;
        // The input lacks `hole`, whose bytes are zeros in the copy read.
        let parse = |mut table: [u8; 4096], hole: Range<usize>, len: usize| {
            table[hole.clone()].fill(0);
            let absent = |r: Range<usize>| r.start < hole.end && hole.start < r.end;
            Schema::parse_with_absent(&table[..len], e, Checksum::WRITTEN, &absent).err()
        };
        assert_eq!(parse(buf, 4..8, n), Some(SchemaError::HeaderAbsent));
        assert_eq!(
            parse(buf, second + 50..second + 60, n),
            Some(SchemaError::EntryAbsent {
                index: 1,
                offset: second
            })
        );
        // Bytes past the entries that `size` still covers: nothing names
        // them but the CRC, which cannot be checked.
        let mut longer = buf;
        longer[8..12].copy_from_slice(&(n as u32 + 8).to_le_bytes());
        assert_eq!(
            parse(longer, n..n + 8, n + 8),
            Some(SchemaError::RestAbsent { offset: n })
        );
    }

    #[test]
    fn damaged_tables_are_refused_with_the_reason() {
        let e = Endian::Little;
        let mut buf = [0u8; 4096];
        let n = write_table(&[], e, &mut buf).unwrap();
        assert!(matches!(
            Schema::parse(&buf[..n - 1], e, Checksum::WRITTEN),
            Err(SchemaError::Truncated { .. })
        ));
        let mut flipped = buf;
        flipped[100] ^= 4;
        assert!(matches!(
            Schema::parse(&flipped[..n], e, Checksum::WRITTEN),
            Err(SchemaError::Crc { .. })
        ));
        assert!(matches!(
            Schema::parse(&buf[..n], Endian::Big, Checksum::WRITTEN),
            Err(SchemaError::BadMagic(_))
        ));
    }
}
