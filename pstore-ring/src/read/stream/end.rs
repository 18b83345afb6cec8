//! The end of a stream: what its tail copies say, and the loss after its
//! newest readable page (FORMAT.md, "Stream tails" and section 11).

use super::*;

/// The newest readable page of a stream, as the end loss needs it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Newest {
    pub(super) slot: u32,
    pub(super) seq: u64,
    /// The index after its events, decoded or counted torn.
    pub(super) covered: u64,
    /// Its last recovered time.
    pub(super) ts: u64,
}

/// One valid tail copy.
#[derive(Clone, Copy, Debug)]
pub(super) struct TailCopy {
    pub(super) seq: u64,
    pub(super) first_index: u64,
    /// `Some` when the page it names was closed: the exact end.
    pub(super) end_index: Option<u64>,
}

/// What a reader may believe of a stream's tail.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tail {
    /// The valid copy with the higher `seq`, if it is not behind the
    /// readable pages.
    pub(super) best: Option<TailCopy>,
    /// A copy failed its checks: the writer may have been rewriting it for
    /// the page after `best`.
    pub(super) torn: bool,
}

/// Reads and checks a stream's two tail copies (FORMAT.md, "Stream
/// tails"), reporting every copy that fails. `newest` is the newest
/// readable page's `seq` (0 if none).
pub(super) fn read_tail(
    region: &Region<'_>,
    info: &StreamInfo,
    newest: u64,
    diags: &mut Vec<Diagnostic>,
) -> Tail {
    let base = match region.tails {
        _ if !info.keeps_tails => {
            return Tail {
                best: None,
                torn: false,
            }
        }
        TailTable::None => {
            return Tail {
                best: None,
                torn: false,
            }
        }
        TailTable::Invalid => {
            return Tail {
                best: None,
                torn: true,
            }
        }
        TailTable::At(base) => base,
    };
    let e = region.header.endian;
    let live_copy = region.header.flags & HEADER_FLAG_LIVE_COPY != 0;
    let pair = (TAIL_COPIES * TAIL_SIZE) as u64;
    let mut copies = [None; TAIL_COPIES];
    let mut torn = false;
    let mut empty = [false; TAIL_COPIES];
    for (c, slot) in copies.iter_mut().enumerate() {
        let offset = base + u64::from(info.index) * pair + (c * TAIL_SIZE) as u64;
        let copy = c as u8;
        let mut report = |problem| {
            diags.push(Diagnostic {
                stream: Some(info.index),
                page: None,
                offset,
                problem,
            })
        };
        if region.is_absent(offset..offset + TAIL_SIZE as u64) {
            report(Problem::TailAbsent { copy });
            torn = true;
            continue;
        }
        let raw = usize::try_from(offset)
            .ok()
            .and_then(|o| region.bytes().get(o..))
            .and_then(|b| b.get(..TAIL_SIZE));
        let Some(t) = raw.and_then(|b| StreamTail::read_from_bytes(b).ok()) else {
            report(Problem::Truncated);
            torn = true;
            continue;
        };
        let raw = zerocopy::IntoBytes::as_bytes(&t);
        if raw.iter().all(|&b| b == 0) {
            empty[c] = true;
            continue;
        }
        let (stored, computed) = (
            t.crc.get(e),
            region.header.checksum.crc(&[&raw[..TAIL_SIZE - 4]]),
        );
        let state = t.state.get(e);
        let bad = if stored != computed {
            Some(Problem::TailCrc {
                copy,
                stored,
                computed,
            })
        } else if t.stream.get(e) != info.index {
            Some(Problem::TailField {
                copy,
                field: "stream",
                value: t.stream.get(e).into(),
            })
        } else if state != TAIL_OPEN && state != TAIL_CLOSED {
            Some(Problem::TailField {
                copy,
                field: "state",
                value: state.into(),
            })
        } else if t.seq.get(e) == 0 {
            Some(Problem::TailField {
                copy,
                field: "seq",
                value: 0,
            })
        } else {
            None
        };
        // A live copy may catch a tail being rewritten: its other copy
        // stands, and its pages say more than either.
        if matches!(bad, Some(Problem::TailCrc { .. })) && live_copy {
            continue;
        }
        if let Some(problem) = bad {
            report(problem);
            torn = true;
            continue;
        }
        *slot = Some(TailCopy {
            seq: t.seq.get(e),
            first_index: t.first_index.get(e),
            end_index: (state == TAIL_CLOSED).then(|| t.end_index.get(e)),
        });
    }
    let best = copies.iter().flatten().copied().max_by_key(|t| t.seq);
    // Copy 0 stays empty only until the stream's second page; any other
    // empty copy is one the writer should have filled.
    let seq = best.map_or(0, |t| t.seq);
    for (c, &was_empty) in empty.iter().enumerate() {
        if was_empty && (c != 0 || seq >= 2) {
            let offset = base + u64::from(info.index) * pair + (c * TAIL_SIZE) as u64;
            diags.push(Diagnostic {
                stream: Some(info.index),
                page: None,
                offset,
                problem: Problem::TailField {
                    copy: c as u8,
                    field: "seq",
                    value: 0,
                },
            });
            torn = true;
        }
    }
    // One page behind is a writer stopped between opening its newest page
    // and rewriting the tail; more is a tail that did not keep up, unless
    // the region is a live copy, whose tails were copied before its pages.
    let best = match best {
        Some(t) if t.seq.saturating_add(1) < newest && live_copy => None,
        Some(t) if t.seq.saturating_add(1) < newest => {
            diags.push(Diagnostic {
                stream: Some(info.index),
                page: None,
                offset: base + u64::from(info.index) * pair,
                problem: Problem::TailBehind {
                    tail: t.seq,
                    newest,
                },
            });
            None
        }
        other => other,
    };
    Tail { best, torn }
}

/// The loss after the newest readable page, if any (FORMAT.md, section 11,
/// "The end of a stream").
pub(super) fn end_loss(
    info: &StreamInfo,
    pages: &[PageReport],
    newest: Option<Newest>,
    tail: &Tail,
) -> Option<Loss> {
    let (seq, covered) = newest.map_or((0, 0), |n| (n.seq, n.covered));
    let (walked, cause) = newer_unreadable(pages, info.page_count, newest.map(|n| n.slot));
    let ring = u64::from(info.page_count);
    let (pages_lost, events, exact) = match tail.best {
        Some(t) if t.seq >= seq => {
            // The ring holds no more pages than it has slots.
            let mut pages_lost = (t.seq - seq).min(ring);
            // With no readable page, every event the stream wrote is
            // lost, counted here (recovered + lost = written stays exact),
            // overwritten ones included.
            let (events, mut exact) = match t.end_index {
                Some(end) => (end.saturating_sub(covered), true),
                None if t.seq == seq => (0, true),
                None => (t.first_index.saturating_sub(covered), false),
            };
            // A torn copy may be the next page's tail half written: that
            // page exists if its slot cannot be read.
            if tail.torn && walked > pages_lost {
                pages_lost += 1;
                exact = false;
            }
            (pages_lost, events, exact)
        }
        // The tail is one page behind: nothing came after the newest page.
        Some(_) => (0, 0, true),
        // No tail to believe: whatever may be newer is lost, uncounted.
        None => (walked, 0, walked == 0),
    };
    if pages_lost == 0 && events == 0 && exact {
        return None;
    }
    Some(Loss {
        stream: info.index,
        kind: LossKind::End,
        events,
        pages: pages_lost,
        after_ts: newest.map(|n| n.ts),
        before_ts: None,
        at_index: covered.saturating_add(events),
        page_seq: None,
        cause: Some(cause.unwrap_or(EndCause::Corrupt)),
        exact,
    })
}

/// Why a page with this status cannot be read, or `None` if it can be (or
/// is unused, or being reset): then no page newer than the newest readable
/// one reached its slot.
fn unreadable(status: PageStatus) -> Option<EndCause> {
    match status {
        PageStatus::Truncated => Some(EndCause::Cut),
        PageStatus::Absent => Some(EndCause::Absent),
        PageStatus::Corrupt => Some(EndCause::Corrupt),
        _ => None,
    }
}

/// Counts the slots that may hold pages newer than the newest readable one,
/// in slot `from`: writers take slots in ring order, so those are the
/// unreadable slots after it, up to the first that is readable (an older
/// page), unused or being reset. With no readable page every unreadable
/// slot counts. Returns the count and the first one's cause. A run of
/// absent slots (one report) and the slots past the input's end (no
/// report) are each counted in one step.
fn newer_unreadable(
    pages: &[PageReport],
    page_count: u32,
    from: Option<u32>,
) -> (u64, Option<EndCause>) {
    let mut n = 0u64;
    let mut first = None;
    let ranges = match from {
        None => [(0, page_count), (0, 0)],
        // Slots from + 1 .. page_count, then 0 .. from.
        Some(from) => [(from.saturating_add(1), page_count), (0, from)],
    };
    for (start, end) in ranges {
        let mut slot = start;
        while slot < end {
            let Some(i) = report_of(pages, slot) else {
                // Past the input's end: every slot from here is cut off.
                n += u64::from(end - slot);
                first.get_or_insert(EndCause::Cut);
                break;
            };
            let p = &pages[i];
            let run_end = p.slot.saturating_add(p.slots).clamp(slot + 1, end);
            match unreadable(p.status) {
                Some(c) => {
                    n += u64::from(run_end - slot);
                    first.get_or_insert(c);
                }
                None if from.is_some() => return (n, first),
                None => {}
            }
            slot = run_end;
        }
    }
    (n, first)
}
