//! The reader on small files built here: bitmaps given byte by byte,
//! every page uncompressed and filled with one byte, its pfn's low byte,
//! so that a page read through the wrong descriptor shows.

use super::*;

/// Bytes per page of the files built here.
const BS: usize = 4096;

/// How a file is made.
struct Spec {
    version: u32,
    max_mapnr: u64,
    /// The 1st bitmap, RAM; padded with zeros to cover `max_mapnr`.
    ram: Vec<u8>,
    /// The 2nd bitmap, dumped pages.
    dumped: Vec<u8>,
    /// `(start, end)` of a split file's range.
    split: Option<(u64, u64)>,
    /// The pages given a descriptor and data, in table order.
    pages: Vec<u64>,
}

impl Spec {
    /// A v6 file of `max_mapnr` pages with these bitmaps, whole (not
    /// split), and no page descriptors.
    fn bitmaps(max_mapnr: u64, ram: Vec<u8>, dumped: Vec<u8>) -> Spec {
        Spec {
            version: 6,
            max_mapnr,
            ram,
            dumped,
            split: None,
            pages: Vec::new(),
        }
    }

    /// All `n` pages RAM and dumped, each with its descriptor.
    fn whole(n: u64) -> Spec {
        let bytes = n.div_ceil(8) as usize;
        Spec {
            pages: (0..n).collect(),
            ..Spec::bitmaps(n, vec![0xff; bytes], vec![0xff; bytes])
        }
    }

    /// The file, and the file offset of each bitmap.
    fn build(&self) -> (Vec<u8>, [usize; 2]) {
        let e = Endian::Little;
        let half = (self.max_mapnr.div_ceil(8) as usize).div_ceil(BS).max(1) * BS;
        let mut h = DiskDumpHeader::new_zeroed();
        h.signature = *MAGIC;
        h.header_version.set(e, self.version);
        h.block_size.set(e, BS as u32);
        h.sub_hdr_size.set(e, 1);
        h.bitmap_blocks.set(e, (2 * half / BS) as u32);
        h.max_mapnr.set(e, self.max_mapnr as u32);
        let mut s = KdumpSubHeader::new_zeroed();
        s.max_mapnr_64.set(e, self.max_mapnr);
        if let Some((a, b)) = self.split {
            s.split.set(e, 1);
            // As makedumpfile writes them: the old fields clamped.
            s.start_pfn.set(e, a.min(u32::MAX.into()));
            s.end_pfn.set(e, b.min(u32::MAX.into()));
            if self.version >= 6 {
                s.start_pfn_64.set(e, a);
                s.end_pfn_64.set(e, b);
            }
        }
        let mut f = vec![0u8; 2 * BS + 2 * half];
        f[..size_of::<DiskDumpHeader>()].copy_from_slice(h.as_bytes());
        f[BS..BS + size_of::<KdumpSubHeader>()].copy_from_slice(s.as_bytes());
        let bitmaps = [2 * BS, 2 * BS + half];
        f[bitmaps[0]..][..self.ram.len()].copy_from_slice(&self.ram);
        f[bitmaps[1]..][..self.dumped.len()].copy_from_slice(&self.dumped);
        let data = f.len() + self.pages.len() * DESC_SIZE as usize;
        for i in 0..self.pages.len() {
            let mut d = PageDesc::new_zeroed();
            d.offset.set(e, (data + i * BS) as u64);
            d.size.set(e, BS as u32);
            f.extend(d.as_bytes());
        }
        for &pfn in &self.pages {
            f.extend(std::iter::repeat_n(pfn as u8, BS));
        }
        (f, bitmaps)
    }

    fn open(&self) -> Dump {
        open(Arc::new(self.build().0)).expect("the file opens")
    }
}

/// The first byte of page `pfn`, or why it cannot be read.
fn first_byte(dump: &Dump, pfn: u64) -> Result<u8, PhysError> {
    let mut b = [0u8; 1];
    dump.memory.read(PhysAddr(pfn * BS as u64), &mut b)?;
    Ok(b[0])
}

#[test]
fn a_split_file_reads_its_range_through_its_own_descriptors() {
    // Pages 0-3 and 8-15 dumped; this part holds 8..16, so its table has
    // 8 descriptors, page 8's first, and pages 0-3 are in another part.
    for version in [6, 5, 2] {
        let spec = Spec {
            version,
            dumped: vec![0x0f, 0xff],
            split: Some((8, 16)),
            pages: (8..16).collect(),
            ..Spec::whole(16)
        };
        let dump = spec.open();
        for pfn in 8..16 {
            assert_eq!(
                first_byte(&dump, pfn).ok(),
                Some(pfn as u8),
                "v{version} pfn {pfn}"
            );
        }
        // Not in this part: said so, never read as zeros nor as another
        // page's bytes.
        for pfn in 0..8 {
            assert!(
                matches!(first_byte(&dump, pfn), Err(PhysError::Outside { .. })),
                "v{version} pfn {pfn}"
            );
        }
        assert_eq!(dump.memory.map().lost_bytes(), 0, "v{version}");
        assert!(
            dump.warnings
                .iter()
                .any(|w| w.contains("split dump (pages 0x8..0x10)")),
            "v{version}: {:?}",
            dump.warnings
        );
    }
}

#[test]
fn a_split_file_whose_range_ends_at_max_mapnr_counts_its_last_descriptors() {
    // max_mapnr a whole number of prefix-count steps: the range's end has
    // a rank of its own, the total.
    let n = RANK_STEP;
    let spec = Spec {
        split: Some((n - 96, n)),
        pages: (n - 96..n).collect(),
        ..Spec::whole(n)
    };
    let dump = spec.open();
    for pfn in n - 96..n {
        assert_eq!(first_byte(&dump, pfn).ok(), Some(pfn as u8), "pfn {pfn}");
    }
    assert!(matches!(
        first_byte(&dump, n - 97),
        Err(PhysError::Outside { .. })
    ));
}

/// `file` flattened (makedumpfile -F) with no record holding the bytes of
/// `gap`.
fn flattened_without(file: &[u8], gap: std::ops::Range<usize>) -> Vec<u8> {
    let mut f = b"makedumpfile\0\0\0\0".to_vec();
    f.extend(1i64.to_be_bytes());
    f.extend(1i64.to_be_bytes());
    f.resize(4096, 0);
    for part in [0..gap.start, gap.end..file.len()] {
        f.extend((part.start as i64).to_be_bytes());
        f.extend((part.len() as i64).to_be_bytes());
        f.extend(&file[part]);
    }
    f.extend((-1i64).to_be_bytes());
    f.extend((-1i64).to_be_bytes());
    f
}

/// What reading page `pfn` of `dump` gives: its first byte or the hole.
fn page_of(dump: &Dump, pfn: u64) -> Result<u8, Option<Backing>> {
    first_byte(dump, pfn).map_err(|e| match e {
        PhysError::Hole { backing, .. } => Some(backing),
        _ => None,
    })
}

#[test]
fn pages_a_flattened_file_lacks_bitmap_bits_for_are_lost_and_so_are_those_counted_after_them() {
    let (file, bitmaps) = Spec::whole(24).build();
    // The 2nd bitmap's first byte missing: pages 0-7 may or may not be
    // dumped, and the descriptors of 8-23 are found by counting them.
    let dump = crate::input::open(Arc::new(flattened_without(
        &file,
        bitmaps[1]..bitmaps[1] + 1,
    )))
    .expect("the file opens");
    for pfn in 0..24 {
        assert_eq!(page_of(&dump, pfn), Err(Some(Backing::Lost)), "pfn {pfn}");
    }
    let warning = format!(
        "the input lacks part of the page bitmaps (the first byte missing at file offset {:#x})",
        bitmaps[1]
    );
    assert!(
        dump.warnings.iter().any(|w| w.starts_with(&warning)),
        "{:?}",
        dump.warnings
    );

    // Its second byte missing: pages 0-7 are still read.
    let dump = crate::input::open(Arc::new(flattened_without(
        &file,
        bitmaps[1] + 1..bitmaps[1] + 2,
    )))
    .expect("the file opens");
    for pfn in 0..8 {
        assert_eq!(page_of(&dump, pfn), Ok(pfn as u8), "pfn {pfn}");
    }
    for pfn in 8..24 {
        assert_eq!(page_of(&dump, pfn), Err(Some(Backing::Lost)), "pfn {pfn}");
    }

    // The 1st bitmap's second byte missing: every page is dumped and
    // counted, so read; had one not been, it would be lost, neither
    // excluded nor outside the dump.
    let mut spec = Spec::whole(24);
    spec.dumped[1] = 0xfe;
    spec.pages.retain(|&p| p != 8);
    let (file, bitmaps) = spec.build();
    let dump = crate::input::open(Arc::new(flattened_without(
        &file,
        bitmaps[0] + 1..bitmaps[0] + 2,
    )))
    .expect("the file opens");
    assert_eq!(page_of(&dump, 8), Err(Some(Backing::Lost)));
    for pfn in (0..24).filter(|&p| p != 8) {
        assert_eq!(page_of(&dump, pfn), Ok(pfn as u8), "pfn {pfn}");
    }
}

#[test]
fn bitmaps_of_alternating_bits_make_a_bounded_map() {
    // 8M pages, every other one dumped, and no descriptor: a 2 MiB file
    // that would map one run per page. (0xaa/0x55 also has the dumped
    // pages no RAM, which no real bitmap has.)
    let n = 8 << 20;
    for ram in [0xaa, 0xff] {
        let spec = Spec::bitmaps(n as u64, vec![ram; n / 8], vec![0x55; n / 8]);
        let (file, bitmaps) = spec.build();
        assert!(file.len() < 3 << 20);
        let dump = open(Arc::new(file)).expect("the file opens");
        let runs = dump.memory.map().runs();
        assert!(runs.len() <= MAX_SPARE_RUNS + 1, "{} runs", runs.len());
        // Runs up to the limit say what the bitmaps say; the rest is lost.
        let cap = MAX_SPARE_RUNS as u64;
        assert_eq!(page_of(&dump, 0), Err(Some(Backing::Lost)));
        assert_eq!(page_of(&dump, 1), Err(Some(Backing::Excluded)));
        assert_eq!(page_of(&dump, cap - 1), Err(Some(Backing::Excluded)));
        assert_eq!(page_of(&dump, cap + 1), Err(Some(Backing::Lost)));
        assert_eq!(
            dump.memory.map().runs().last(),
            Some(&Run::lost(
                PhysAddr(cap * BS as u64)..PhysAddr(n as u64 * BS as u64)
            ))
        );
        let warning = format!(
            "the page bitmaps split memory into more runs than the {cap} its 0 page descriptors allow (a corrupt or hostile bitmap, its 2nd half's bits for the page at physical address {:#x} at file offset {:#x})",
            cap * BS as u64,
            bitmaps[1] as u64 + cap / 8
        );
        assert!(
            dump.warnings.iter().any(|w| w.starts_with(&warning)),
            "{:?}",
            dump.warnings
        );
    }
}

#[test]
fn pages_cut_off_past_the_run_limit_are_lost_and_counted() {
    // Excluded pages every other pfn up to past the limit, then dumped
    // pages the file has no descriptors for: past the limit, mapped as
    // lost with what the bitmaps exclude, and the first of them named.
    let n: u64 = 256 << 10;
    let sparse = (MAX_SPARE_RUNS as u64 * 2 + 8000) / 8;
    let mut ram = vec![0xff; n as usize / 8];
    let mut dumped = ram.clone();
    ram[..sparse as usize].fill(0x55);
    dumped[..sparse as usize].fill(0);
    let spec = Spec::bitmaps(n, ram, dumped);
    let dump = spec.open();
    let cut = n - sparse * 8;
    assert!(
        dump.warnings.iter().any(|w| w.contains(&format!(
            "before the descriptors or data of {cut} dumped pages (the first at physical address {:#x}); they are lost",
            sparse * 8 * BS as u64
        ))),
        "{:?}",
        dump.warnings
    );
    assert_eq!(page_of(&dump, n - 1), Err(Some(Backing::Lost)));
}

#[test]
fn pages_that_lengthen_the_last_run_at_the_limit_are_not_past_it() {
    // Excluded pages every other pfn make exactly the limit's runs; the
    // page after the last lengthens its run and is excluded as the
    // bitmaps say, with nothing said of a limit.
    let cap = MAX_SPARE_RUNS as u64;
    let n = (2 * cap + 8).next_multiple_of(8);
    let mut ram = vec![0x55; n as usize / 8];
    ram[(2 * cap / 8) as usize..].fill(0);
    let mut spec = Spec::bitmaps(n, ram, vec![0; n as usize / 8]);
    spec.ram[((2 * cap - 1) / 8) as usize] |= 0x80;
    let dump = spec.open();
    assert_eq!(dump.memory.map().runs().len(), MAX_SPARE_RUNS);
    assert_eq!(page_of(&dump, 2 * cap - 1), Err(Some(Backing::Excluded)));
    assert!(
        !dump.warnings.iter().any(|w| w.contains("more runs")),
        "{:?}",
        dump.warnings
    );
}

#[test]
fn pages_the_file_holds_past_the_run_limit_are_still_read() {
    // Excluded pages every other pfn, none dumped, past the limit (a
    // cut or a gap among a filtered dump's pages makes the like), then
    // eight dumped pages the file holds: those are read, the rest past
    // the limit is lost.
    let sparse = (MAX_SPARE_RUNS as u64 * 2 + 8000).next_multiple_of(8);
    let n = sparse + 16;
    let mut ram = vec![0x55; n as usize / 8];
    let mut dumped = vec![0; n as usize / 8];
    ram[sparse as usize / 8] = 0xff;
    dumped[sparse as usize / 8] = 0xff;
    let spec = Spec {
        pages: (sparse..sparse + 8).collect(),
        ..Spec::bitmaps(n, ram, dumped)
    };
    let dump = spec.open();
    assert!(
        dump.warnings
            .iter()
            .any(|w| w.contains("split memory into more runs")),
        "{:?}",
        dump.warnings
    );
    for pfn in sparse..sparse + 8 {
        assert_eq!(page_of(&dump, pfn), Ok(pfn as u8), "pfn {pfn}");
    }
    assert_eq!(page_of(&dump, sparse - 2), Err(Some(Backing::Lost)));
    assert_eq!(page_of(&dump, sparse + 8), Err(Some(Backing::Lost)));
    // The limit (4 runs per descriptor the file holds, and the spare
    // ones), then a lost run, the present one and a lost one.
    assert!(dump.memory.map().runs().len() <= 8 * 4 + MAX_SPARE_RUNS + 3);
}
