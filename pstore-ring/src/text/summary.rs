//! A region's summary in words: its header and state, then per stream its
//! counts, its losses and, when asked, every page slot.

use super::{LossReason, Quoted};
use crate::endian::Endian;
use crate::read::{Loss, StreamInfo};
use core::fmt::{self, Write};

/// Writes a region's summary: header, state, then per stream its counts,
/// its losses and, when `pages` is set, every page slot (a run of absent
/// slots on one line, with its count). Without `pages`, empty streams
/// ([`Trace::is_empty_stream`](crate::read::Trace::is_empty_stream)) are
/// left out and returned, for the caller to say in one line how to list
/// them; with it, every stream is written and none returned.
pub fn write_summary(
    out: &mut impl Write,
    region: &crate::read::Region<'_>,
    trace: &crate::read::Trace<'_>,
    pages: bool,
) -> Result<EmptyStreams, fmt::Error> {
    let streams = trace.streams.iter().map(|st| StreamSummary {
        info: &st.info,
        events: st.events.len(),
        pages: &st.pages,
        losses: &st.losses,
        empty: trace.is_empty_stream(st),
    });
    summary(out, region, streams, pages)
}

/// As [`write_summary`], for a trace decoded page by page: the same text.
pub fn write_paged_summary(
    out: &mut impl Write,
    region: &crate::read::Region<'_>,
    trace: &crate::read::PagedTrace<'_>,
    pages: bool,
) -> Result<EmptyStreams, fmt::Error> {
    let streams = trace.streams.iter().map(|st| StreamSummary {
        info: &st.info,
        events: st.event_count(),
        pages: &st.pages,
        losses: &st.losses,
        empty: trace.is_empty_stream(st),
    });
    summary(out, region, streams, pages)
}

/// Empty streams by kind, as one line tells them: `14 empty streams (12
/// nesting lanes, 2 free user streams)`. A region holds many by design
/// (nesting lanes above 0, the pool's free user streams), and a list of
/// them would bury the streams that hold events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmptyStreams {
    /// Kernel streams of lane 0: a CPU that recorded nothing.
    pub cpus: usize,
    /// Kernel streams of a nesting lane above 0.
    pub lanes: usize,
    /// User streams no process has taken ([`StreamInfo::is_free`]).
    pub free: usize,
    /// User streams a process took and left empty.
    pub user: usize,
}

impl EmptyStreams {
    /// Counts `info`, an empty stream.
    pub fn add(&mut self, info: &StreamInfo) {
        let n = match (info.is_kernel(), info.lane) {
            (true, 0) => &mut self.cpus,
            (true, _) => &mut self.lanes,
            (false, _) if info.is_free() => &mut self.free,
            (false, _) => &mut self.user,
        };
        *n += 1;
    }

    pub fn total(&self) -> usize {
        self.cpus + self.lanes + self.free + self.user
    }
}

impl fmt::Display for EmptyStreams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let total = self.total();
        write!(f, "{total} empty stream{}", plural(total))?;
        let kinds = [
            (self.cpus, "CPU stream"),
            (self.lanes, "nesting lane"),
            (self.free, "free user stream"),
            (self.user, "idle user stream"),
        ];
        let mut sep = " (";
        for (n, what) in kinds.into_iter().filter(|(n, _)| *n > 0) {
            write!(f, "{sep}{n} {what}{}", plural(n))?;
            sep = ", ";
        }
        if sep == ", " {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// What a summary says of one stream, however it was decoded.
struct StreamSummary<'s> {
    info: &'s StreamInfo,
    events: usize,
    pages: &'s [crate::read::PageReport],
    losses: &'s [Loss],
    /// Whether it has nothing to tell, so that only the count of such
    /// streams is written unless every page is.
    empty: bool,
}

/// The callsite area's line of a summary, if the region has one: its
/// entries, the damaged ones, the callsites it refused, and where a walk
/// of it stopped early.
fn callsites(out: &mut impl Write, region: &crate::read::Region<'_>) -> fmt::Result {
    let Ok(walk) = region.callsites() else {
        return Ok(());
    };
    let damaged = walk.entries.iter().filter(|e| e.is_err()).count();
    let intact = walk.entries.len() - damaged;
    let s = if intact == 1 { "" } else { "s" };
    write!(out, "callsite area: {intact} callsite{s}")?;
    if damaged > 0 {
        write!(out, ", {damaged} damaged")?;
    }
    match region.callsite_header() {
        Ok(h) => write!(out, ", {} refused", h.refused)?,
        Err(why) => write!(out, ", refusals unknown: {why}")?,
    }
    if let Some(stop) = walk.stopped {
        write!(out, "; listing stopped: {stop}")?;
    }
    writeln!(out)
}

fn summary<'s>(
    out: &mut impl Write,
    region: &crate::read::Region<'_>,
    streams: impl Iterator<Item = StreamSummary<'s>>,
    pages: bool,
) -> Result<EmptyStreams, fmt::Error> {
    use crate::read::{reason_name, PageStatus};
    let h = &region.header;
    let order = match h.endian {
        Endian::Little => "little",
        Endian::Big => "big",
    };
    writeln!(
        out,
        "format v{}, {order}-endian, {}-bit, {} bytes, page size {}",
        h.version,
        h.word_size * 8,
        h.region_size,
        h.page_size
    )?;
    write!(
        out,
        "kernel {} host {} producer {}",
        Quoted(h.kernel_release.as_bytes()),
        Quoted(h.hostname.as_bytes()),
        Quoted(h.producer.as_bytes())
    )?;
    writeln!(
        out,
        " generation {} created {} ns wall offset {} ns",
        h.generation, h.created_ns, h.wall_offset_ns
    )?;
    match &region.state {
        Ok(s) => {
            write!(out, "state {}", s.state_name())?;
            if s.reason != 0 {
                write!(
                    out,
                    " ({}) at {} ns on cpu {}: {}",
                    reason_name(s.reason),
                    s.crash_ns,
                    s.crash_cpu,
                    Quoted(s.message.as_bytes())
                )?;
            }
            writeln!(out)?;
        }
        Err(p) => writeln!(out, "state unreadable: {p}")?,
    }
    callsites(out, region)?;
    let mut left_out = EmptyStreams::default();
    for st in streams {
        if st.empty && !pages {
            left_out.add(st.info);
            continue;
        }
        let n = |s| crate::read::pages_with(st.pages, s);
        let exact = st.losses.iter().all(|l| l.exact);
        let lost = crate::read::lost_events(st.losses);
        let at_least = if exact { "" } else { "at least " };
        write!(
            out,
            "{}: {} events, {at_least}{} lost; pages: {} intact, {} salvaged",
            st.info.label(),
            st.events,
            lost,
            n(PageStatus::Intact),
            n(PageStatus::Salvaged)
        )?;
        let bad = n(PageStatus::Corrupt)
            + n(PageStatus::Damaged)
            + n(PageStatus::Truncated)
            + n(PageStatus::Resetting);
        write!(out, ", {bad} unreadable")?;
        if n(PageStatus::Absent) > 0 {
            write!(out, ", {} not in the dump", n(PageStatus::Absent))?;
        }
        writeln!(out, ", {} unused", n(PageStatus::Unused))?;
        for l in st.losses {
            let at_least = if l.exact { "" } else { "at least " };
            write!(
                out,
                "  lost {at_least}{} ({}) before index {}",
                l.events,
                LossReason(l),
                l.at_index
            )?;
            if let Some(t) = l.after_ts {
                write!(out, " after {t} ns")?;
            }
            if let Some(t) = l.before_ts {
                write!(out, " before {t} ns")?;
            }
            writeln!(out)?;
        }
        if pages {
            for p in st.pages {
                if p.slots == 1 {
                    write!(out, "  page {} at {:#x}: {:?}", p.slot, p.offset, p.status)?;
                } else {
                    write!(
                        out,
                        "  pages {}.. at {:#x}: {:?} ({} of them)",
                        p.slot, p.offset, p.status, p.slots
                    )?;
                }
                if p.seq != 0 {
                    write!(out, " seq {}", p.seq)?;
                }
                if p.records != 0 {
                    write!(out, " {} records", p.records)?;
                }
                writeln!(out)?;
            }
        }
    }
    Ok(left_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_the_callsite_area_and_its_damage() {
        use crate::debug_args::Callsite;
        use crate::read::{HeaderTrust, Region};
        use crate::write::{format as lay_out, RegionConfig, StreamSpec};
        let specs = [StreamSpec::cpu(0)];
        let cfg = RegionConfig {
            page_size: 1024,
            pages_per_stream: Some(2),
            streams: &specs,
            callsite_pages: 1,
            ..Default::default()
        };
        let mut mem = alloc::vec![0u8; 8192];
        let site = Callsite {
            source: 1,
            level: 7,
            category: 0xFFFF,
            line: 3,
            module: b"m",
            function: b"f",
            file: b"f.c",
            format: b"%d\n",
        };
        let torn = {
            let mut f = lay_out(&mut mem, &cfg).unwrap();
            let area = f.callsites.as_mut().unwrap();
            let torn = area.add(&site).unwrap();
            area.add(&site).unwrap();
            torn
        };
        let line = |mem: &[u8]| {
            let region = Region::parse(mem, HeaderTrust::Checksummed).unwrap();
            let mut out = alloc::string::String::new();
            callsites(&mut out, &region).unwrap();
            (out, region.callsites.clone().unwrap().range.start as usize)
        };
        let (whole, area) = line(&mem);
        assert_eq!(whole, "callsite area: 2 callsites, 0 refused\n");
        let at = area + torn as usize;
        mem[at + 4..at + 8].fill(0);
        assert_eq!(
            line(&mem).0,
            "callsite area: 1 callsite, 1 damaged, 0 refused\n"
        );
    }
}
