//! Walking the records of one page's committed bytes.
//!
//! The walk is bounded by the slice it is given and always moves forward by
//! at least one word, so a hostile page can neither make it read out of
//! bounds nor loop. It stops for good at the first malformed record (the
//! iterator is fused): the caller decides whether what came before counts.

use crate::endian::{u32_at, u64_at, Endian};
use crate::layout::*;

/// One data record: its position, absolute timestamp, type and payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// Offset of the record header from the start of the page's data.
    pub offset: usize,
    pub ts: u64,
    pub type_id: u8,
    /// The payload including up to three bytes of padding.
    pub payload: &'a [u8],
}

/// What stopped a record walk, with the offset (from the start of the
/// page's data) of the record at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record at data offset {offset}: length is zero")]
    ZeroLength { offset: usize },
    #[error("record at data offset {offset}: type 0 is never written")]
    InvalidType { offset: usize },
    #[error("record at data offset {offset}: type {type_id} is reserved")]
    ReservedType { offset: usize, type_id: u8 },
    #[error("record at data offset {offset}: {len} bytes run past the committed {commit}")]
    Overrun {
        offset: usize,
        len: usize,
        commit: usize,
    },
    #[error("record at data offset {offset}: {kind} record has length {len}, expected {expected}")]
    BadTimeRecord {
        offset: usize,
        kind: &'static str,
        len: usize,
        expected: usize,
    },
    #[error(
        "record at data offset {offset}: absolute time {ts} is before the running time {running}"
    )]
    TimeBackwards {
        offset: usize,
        ts: u64,
        running: u64,
    },
    #[error("record at data offset {offset}: time overflows 64 bits")]
    TimeOverflow { offset: usize },
}

/// Iterates the data records in `data` (a page's committed bytes), starting
/// from the page's `first_ts`.
#[derive(Clone, Debug)]
pub struct Records<'a> {
    data: &'a [u8],
    at: usize,
    time: u64,
    e: Endian,
}

impl<'a> Records<'a> {
    pub fn new(data: &'a [u8], first_ts: u64, e: Endian) -> Self {
        Records {
            data,
            at: 0,
            time: first_ts,
            e,
        }
    }

    fn fail(&mut self, err: RecordError) -> Option<Result<RawRecord<'a>, RecordError>> {
        self.data = &[];
        self.at = 0;
        Some(Err(err))
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<RawRecord<'a>, RecordError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let offset = self.at;
            let commit = self.data.len();
            if offset >= commit {
                return None;
            }
            let Some(word) = u32_at(self.data, offset, self.e) else {
                return self.fail(RecordError::Overrun {
                    offset,
                    len: RECORD_HEADER_SIZE,
                    commit,
                });
            };
            let (type_id, words, delta) = split_record_header(word);
            let len = words as usize * RECORD_ALIGN;
            if words == 0 {
                return self.fail(RecordError::ZeroLength { offset });
            }
            let Some(record) = self.data.get(offset..).and_then(|r| r.get(..len)) else {
                return self.fail(RecordError::Overrun {
                    offset,
                    len,
                    commit,
                });
            };
            match type_id {
                TYPE_INVALID => return self.fail(RecordError::InvalidType { offset }),
                TYPE_PADDING => {}
                TYPE_TIME_EXTEND => {
                    if len != 4 {
                        let kind = "time-extend";
                        return self.fail(RecordError::BadTimeRecord {
                            offset,
                            kind,
                            len,
                            expected: 4,
                        });
                    }
                    let add = u64::from(delta) << DELTA_BITS;
                    let Some(t) = self.time.checked_add(add) else {
                        return self.fail(RecordError::TimeOverflow { offset });
                    };
                    self.time = t;
                }
                TYPE_TIME_ABS => {
                    let ts = u64_at(record, 4, self.e).filter(|_| len == 12);
                    let Some(ts) = ts else {
                        let kind = "absolute-time";
                        return self.fail(RecordError::BadTimeRecord {
                            offset,
                            kind,
                            len,
                            expected: 12,
                        });
                    };
                    if ts < self.time {
                        let running = self.time;
                        return self.fail(RecordError::TimeBackwards {
                            offset,
                            ts,
                            running,
                        });
                    }
                    self.time = ts;
                }
                t if t < FIRST_EVENT_TYPE => {
                    return self.fail(RecordError::ReservedType { offset, type_id: t });
                }
                _ => {
                    let Some(ts) = self.time.checked_add(u64::from(delta)) else {
                        return self.fail(RecordError::TimeOverflow { offset });
                    };
                    self.time = ts;
                    self.at = offset + len;
                    let payload = &record[RECORD_HEADER_SIZE..];
                    return Some(Ok(RawRecord {
                        offset,
                        ts,
                        type_id,
                        payload,
                    }));
                }
            }
            self.at = offset + len;
        }
    }
}

impl core::iter::FusedIterator for Records<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endian::U32;

    fn word(e: Endian, t: u8, w: u8, d: u16) -> [u8; 4] {
        U32::new(e, record_header(t, w, d)).0
    }

    #[test]
    fn walks_data_extend_and_absolute_records() {
        let e = Endian::Little;
        let mut d = Vec::new();
        d.extend(word(e, 20, 3, 5));
        d.extend(7u64.to_le_bytes());
        d.extend(word(e, TYPE_TIME_EXTEND, 1, 2));
        d.extend(word(e, 20, 2, 1));
        d.extend(9u32.to_le_bytes());
        d.extend(word(e, TYPE_PADDING, 2, 0));
        d.extend([0; 4]);
        d.extend(word(e, TYPE_TIME_ABS, 3, 0));
        d.extend(1_000_000u64.to_le_bytes());
        d.extend(word(e, 21, 1, 0));
        let recs: Vec<_> = Records::new(&d, 100, e).map(Result::unwrap).collect();
        assert_eq!(recs.len(), 3);
        assert_eq!(
            (recs[0].ts, recs[0].type_id, recs[0].payload),
            (105, 20, &7u64.to_le_bytes()[..])
        );
        assert_eq!(recs[1].ts, 105 + (2 << 16) + 1);
        assert_eq!(
            (recs[2].ts, recs[2].offset, recs[2].payload.len()),
            (1_000_000, 44, 0)
        );
    }

    #[test]
    fn stops_for_good_on_malformed_records() {
        let e = Endian::Big;
        let mut d = Vec::new();
        d.extend(word(e, 20, 1, 0));
        d.extend(word(e, 20, 9, 0));
        let mut it = Records::new(&d, 0, e);
        assert!(it.next().unwrap().is_ok());
        assert_eq!(
            it.next(),
            Some(Err(RecordError::Overrun {
                offset: 4,
                len: 36,
                commit: 8
            }))
        );
        assert_eq!(it.next(), None);

        for (bad, err) in [
            (word(e, 20, 0, 0), RecordError::ZeroLength { offset: 0 }),
            (word(e, 0, 1, 0), RecordError::InvalidType { offset: 0 }),
            (
                word(e, 9, 1, 0),
                RecordError::ReservedType {
                    offset: 0,
                    type_id: 9,
                },
            ),
        ] {
            assert_eq!(Records::new(&bad, 0, e).next(), Some(Err(err)));
        }
        let mut back = word(e, TYPE_TIME_ABS, 3, 0).to_vec();
        back.extend(5u64.to_be_bytes());
        let err = RecordError::TimeBackwards {
            offset: 0,
            ts: 5,
            running: 10,
        };
        assert_eq!(Records::new(&back, 10, e).next(), Some(Err(err)));
        assert!(matches!(
            Records::new(&[1, 2], 0, e).next(),
            Some(Err(RecordError::Overrun { .. }))
        ));
    }
}
