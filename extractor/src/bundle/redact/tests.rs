//! Redaction against built regions: classes parsed and printed back,
//! grants that keep only what they name (never the input layer), and
//! kernel addresses hashed alike in text and binary fields of both word
//! sizes.

use super::*;

#[test]
fn classes_parse_and_print_back() {
    for text in ["printk", "drm_flip.connector", "printk=input:"] {
        assert_eq!(Class::parse(text).unwrap().to_string(), text);
    }
    for bad in ["", "a.b.c", "printk=", "=x", "bad name", ".field"] {
        assert!(Class::parse(bad).is_err(), "{bad}");
    }
}

/// `addr` in all three.
fn region_with_addresses(word_size: u8, addr: u64) -> Vec<u8> {
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    let f = |name, kind| FieldDef { name, kind };
    let fields = [
        f("ip", FieldKind::U64),
        f("raw", FieldKind::Bytes),
        f("msg", FieldKind::Str),
    ];
    let custom = [EventDef {
        id: 40,
        name: "probe",
        fields: &fields,
    }];
    let specs = [StreamSpec::cpu(0)];
    let cfg = RegionConfig {
        word_size,
        endian: Endian::Little,
        page_size: 512,
        pages_per_stream: Some(2),
        streams: &specs,
        custom_events: &custom,
        ..Default::default()
    };
    let mut mem = vec![0u8; 8192];
    let mut region = write::format(&mut mem, &cfg).unwrap();
    let mut ws: Vec<_> = region.streams.by_ref().collect();
    let digits = usize::from(word_size) * 2;
    let text = format!("fault at {addr:0digits$x}");
    let mut raw = vec![0xaa];
    raw.extend_from_slice(&addr.to_le_bytes()[..usize::from(word_size)]);
    let v = [
        Value::Unsigned(addr),
        Value::Bytes(&raw),
        Value::Str(text.as_bytes()),
    ];
    ws[0].write_event(1_000, &custom[0], &v).unwrap();
    ws.iter_mut().for_each(|w| w.close());
    drop(ws);
    mem
}

/// A debug message about a DRM device and one of the input layer's,
/// with a kernel address among its arguments.
fn region_with_debug_messages() -> Vec<u8> {
    region_with_debug_messages_and(&[])
}

/// [`region_with_debug_messages`], then messages recorded formatted,
/// with no callsite, each of a DRM category (or none) and its text.
fn region_with_debug_messages_and(formatted: &[(u16, &[u8])]) -> Vec<u8> {
    use pstore_ring::debug_args::{encode, encoded_len, Callsite, DebugArg};
    use pstore_ring::layout::{CALLSITE_DRM, CALLSITE_DYNDBG};
    use pstore_ring::schema::{builtin, EVENT_DEBUG};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    let specs = [StreamSpec::cpu(0)];
    let cfg = RegionConfig {
        page_size: 1024,
        streams: &specs,
        callsite_pages: 1,
        ..Default::default()
    };
    let mut mem = vec![0u8; 16 * 1024];
    let mut region = write::format(&mut mem, &cfg).unwrap();
    let mut area = region.callsites.take().unwrap();
    let drm = area
        .add(&Callsite {
            source: CALLSITE_DRM,
            level: 7,
            category: 4,
            line: 0,
            module: b"drm",
            function: b"drm_atomic_state_init [drm]",
            file: b"",
            format: b"Allocated atomic state %p\n",
        })
        .unwrap();
    let keys = area
        .add(&Callsite {
            source: CALLSITE_DYNDBG,
            level: 7,
            category: 0xffff,
            line: 700,
            module: b"hid",
            function: b"hidinput_hid_event",
            file: b"drivers/hid/hid-input.c",
            format: b"key %d\n",
        })
        .unwrap();
    let def = builtin(EVENT_DEBUG).unwrap();
    let mut cpu0 = region.streams.next().unwrap();
    for (ts, id, arg) in [
        (1, drm, DebugArg::Addr(0xffff_8880_0123_4567)),
        (2, keys, DebugArg::Int(30)),
    ] {
        let mut bytes = vec![0u8; encoded_len(&[arg])];
        encode(&mut bytes, &[arg], Endian::Little).unwrap();
        let values = [
            Value::Unsigned(id.into()),
            Value::Unsigned(7),
            Value::Unsigned(0),
            Value::Unsigned(4),
            Value::Str(b""),
            Value::Bytes(&bytes),
        ];
        cpu0.write_event(ts, def, &values).unwrap();
    }
    for (ts, &(category, text)) in (3..).zip(formatted) {
        let values = [
            Value::Unsigned(0),
            Value::Unsigned(7),
            Value::Unsigned(pstore_ring::schema::DEBUG_FORMATTED.into()),
            Value::Unsigned(category.into()),
            Value::Str(b""),
            Value::Bytes(text),
        ];
        cpu0.write_event(ts, def, &values).unwrap();
    }
    mem
}

#[test]
fn a_grant_leaves_out_a_message_it_cannot_tell_from_the_input_layers() {
    use pstore_ring::layout::CATEGORY_NONE;
    use pstore_ring::read::HeaderTrust;
    let mem = region_with_debug_messages_and(&[
        (CATEGORY_NONE, b"hid-generic: key 31\n"),
        (2, b"[drm] a KMS line\n"),
    ]);
    let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
    let trace = region.decode_paged();
    let counts = |grant: Option<Grant>| {
        let rules = Rules {
            grant,
            ..Rules::default()
        };
        plan(&region, &RegionKey::of(&region), &trace, &rules).counts
    };
    // Every debug message granted: the named input-layer callsite and
    // the unnamed message of no DRM category are left out; the DRM
    // ones, named or not, stay.
    let all = counts(Some(Grant {
        uid: 1000,
        kernel_events: vec!["debug".into()],
        ..Grant::default()
    }));
    assert_eq!((all.outside_grant, all.input_layer), (0, 2));
    // Root's bundle leaves out only what it knows is the input
    // layer's.
    assert_eq!(counts(None).input_layer, 1);
}

#[test]
fn a_grant_keeps_only_what_it_names_and_never_the_input_layer() {
    use pstore_ring::read::HeaderTrust;
    let mem = region_with_debug_messages();
    let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
    let trace = region.decode_paged();
    let granted = |kernel_events: &[&str]| {
        let rules = Rules {
            grant: Some(Grant {
                uid: 1000,
                kernel_events: kernel_events.iter().map(|e| e.to_string()).collect(),
                ..Grant::default()
            }),
            ..Rules::default()
        };
        plan(&region, &RegionKey::of(&region), &trace, &rules).counts
    };
    // Every debug message granted: the input layer's is left out all
    // the same.
    let all = granted(&["debug"]);
    assert_eq!((all.outside_grant, all.input_layer), (0, 1));
    // None granted: both are outside the grant.
    let none = granted(&[]);
    assert_eq!((none.outside_grant, none.input_layer), (2, 0));
}

#[test]
fn input_layer_messages_stay_only_in_roots_bundles_and_addresses_are_hashed() {
    use pstore_ring::read::{DebugEvent, HeaderTrust};
    let mem = region_with_debug_messages();
    let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
    let trace = region.decode_paged();
    let messages = |rules: &Rules| {
        let plan = plan(&region, &RegionKey::of(&region), &trace, rules);
        let view = crate::output::RegionView {
            index: 0,
            addr: 0,
            region: &region,
            trace: &trace,
            overlay: Some(&plan.overlay),
            pointers: pstore_ring::kprintf::Pointers::Raw,
        };
        let t = region.schema.get(pstore_ring::schema::EVENT_DEBUG).unwrap();
        let texts: Vec<String> = view
            .stream(0)
            .unwrap()
            .events()
            .map(|ev| {
                let d = DebugEvent::parse(t, ev.payload, Endian::Little).unwrap();
                let m = region.debug_message(&d, &view.pointers);
                String::from_utf8(m.text.unwrap()).unwrap()
            })
            .collect();
        (texts, plan.counts)
    };
    let (texts, counts) = messages(&Rules::default());
    assert_eq!(counts.input_layer, 1);
    assert_eq!(texts.len(), 1, "{texts:?}");
    // The address became a hash of %p's shape: 8 zeros, 8 digits.
    let id = texts[0]
        .strip_prefix("[drm:drm_atomic_state_init [drm]] Allocated atomic state 00000000")
        .unwrap_or_else(|| panic!("{texts:?}"));
    assert_eq!(id.trim_end().len(), 8, "{texts:?}");
    let (texts, counts) = messages(&Rules {
        input_layer: true,
        raw_pointers: true,
        ..Rules::default()
    });
    assert_eq!(counts.input_layer, 0);
    assert_eq!(
        texts,
        [
            "[drm:drm_atomic_state_init [drm]] Allocated atomic state ffff888001234567\n",
            "key 30\n"
        ]
    );
}

#[test]
fn u64_binary_and_text_fields_are_hashed_alike_in_both_word_sizes() {
    use pstore_ring::read::HeaderTrust;
    for (word_size, addr) in [(8u8, 0xffff_ffff_8123_4567u64), (4, 0xc123_4567)] {
        let mem = region_with_addresses(word_size, addr);
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode_paged();
        let plan = plan(&region, &RegionKey::of(&region), &trace, &Rules::default());
        assert_eq!(plan.counts.pointers, 3, "word size {word_size}");
        let view = crate::output::RegionView {
            index: 0,
            addr: 0,
            region: &region,
            trace: &trace,
            overlay: Some(&plan.overlay),
            pointers: pstore_ring::kprintf::Pointers::Raw,
        };
        let ev = view.stream(0).unwrap().events().next().unwrap();
        let t = region.schema.get(40).unwrap();
        let values = t.decode(ev.payload, region.header.endian).unwrap();
        let word = Word::of(&region);
        let h = Hasher::new(&RegionKey::of(&region)).pointer(addr, word);
        let digits = usize::from(word_size) * 2;
        let n = usize::from(word_size);
        assert_eq!(values[0], Value::Unsigned(h));
        let Value::Bytes(raw) = values[1] else {
            panic!("{values:?}")
        };
        assert_eq!(raw[1..], h.to_le_bytes()[..n]);
        assert_eq!(
            values[2],
            Value::Str(format!("fault at {h:0digits$x}").as_bytes())
        );
        // Kept with --raw-pointers.
        let raw_rules = Rules {
            raw_pointers: true,
            ..Rules::default()
        };
        assert_eq!(
            super::plan(&region, &RegionKey::of(&region), &trace, &raw_rules)
                .counts
                .pointers,
            0
        );
    }
}
