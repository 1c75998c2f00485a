//! Malformed input (the cases of ccp-anchors §1.7 that crash or stop portus, and what libccp
//! would misread) and the encoder's refusals.

use ccp_wire::netlink::{frame, unframe, NLMSG_HDR_LEN};
use ccp_wire::{
    decode, decode_all, implicit, limits, ChangeProg, ContentError, Create, DecodeError, EncodeError, Event, EventPart, Install,
    Instr, Measure, Msg, Op, Operand, Ready, Reg, RegKind, Slot, UpdateField, UpdateFields,
};

fn header(msg_type: u16, len: u16, sid: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(msg_type.to_le_bytes());
    b.extend(len.to_le_bytes());
    b.extend(sid.to_le_bytes());
    b
}

fn content_error(bytes: &[u8]) -> (usize, ContentError) {
    match decode(bytes) {
        Err(DecodeError::Content { offset, error, .. }) => (offset, error),
        other => panic!("expected a content error, got {other:?}"),
    }
}

fn create() -> Create {
    Create { sid: 9, init_cwnd: 14480, mss: 1448, src_ip: 1, src_port: 2, dst_ip: 3, dst_port: 4, cong_alg: Some("cubic".into()) }
}

/// A small valid program: one event, condition at 0, body at 1..3.
fn install() -> Install {
    let flag = Reg::new(RegKind::Implicit, implicit::EXPR_FLAG);
    let cwnd = Reg::new(RegKind::Implicit, implicit::CWND);
    Install {
        program_uid: 3,
        events: vec![Event { flag_idx: 0, num_flag_instrs: 1, body_idx: 1, num_body_instrs: 2 }],
        instrs: vec![
            Instr { op: Op::Bind, res: flag, left: flag, right: Reg::imm(1) },
            Instr { op: Op::Bind, res: cwnd, left: cwnd, right: Reg::imm(14480) },
            Instr {
                op: Op::Max,
                res: Reg::new(RegKind::Tmp, 7),
                left: Reg::new(RegKind::Primitive, 14),
                right: Reg::new(RegKind::Local, 7),
            },
        ],
    }
}

// ---- header --------------------------------------------------------------------------------

#[test]
fn fewer_than_eight_bytes() {
    for n in 0..8 {
        assert_eq!(decode(&[0u8; 7][..n]), Err(DecodeError::ShortHeader { available: n }));
    }
}

#[test]
fn len_below_header() {
    for len in 0..8 {
        let b = header(1, len, 0);
        assert_eq!(decode(&b), Err(DecodeError::LenBelowHeader { msg_type: 1, len }));
    }
}

#[test]
fn len_beyond_buffer() {
    let bytes = Msg::Create(create()).to_bytes().unwrap();
    assert_eq!(decode(&bytes[..95]), Err(DecodeError::LenBeyondBuffer { msg_type: 0, len: 96, available: 95 }));
}

#[test]
fn unknown_type_reports_len_to_skip() {
    let mut b = header(6, 12, 0);
    b.extend([1, 2, 3, 4]);
    let err = decode(&b).unwrap_err();
    assert_eq!(err, DecodeError::UnknownType { msg_type: 6, len: 12 });
    assert_eq!(err.skip_len(), Some(12));
    // portus truncates the type to u8, so 0x0100 would alias CREATE there; here it is unknown.
    let b = header(0x0100, 8, 0);
    assert_eq!(decode(&b), Err(DecodeError::UnknownType { msg_type: 0x0100, len: 8 }));
}

// ---- CREATE ----------------------------------------------------------------------------------

#[test]
fn short_create() {
    // portus panics when the body is shorter than 25 bytes (len < 33).
    for len in [8u16, 20, 32, 33, 95] {
        let mut b = header(0, len, 1);
        b.resize(usize::from(len), 0);
        assert_eq!(decode(&b), Err(DecodeError::LenMismatch { msg_type: 0, len, expected: 96 }), "len {len}");
    }
    let mut long = Msg::Create(create()).to_bytes().unwrap();
    long[2] = 97;
    long.push(0);
    assert_eq!(decode(&long), Err(DecodeError::LenMismatch { msg_type: 0, len: 97, expected: 96 }));
}

#[test]
fn create_with_non_utf8_name_is_lossy() {
    let mut b = Msg::Create(create()).to_bytes().unwrap();
    b[32..37].copy_from_slice(&[b'a', 0xff, 0xfe, b'b', 0]);
    let (msg, _) = decode(&b).unwrap();
    let Msg::Create(c) = msg else { panic!("not a create") };
    assert_eq!(c.cong_alg.as_deref(), Some("a\u{fffd}\u{fffd}b"));
    // It can be encoded again (as its UTF-8 replacement).
    assert!(Msg::Create(c).to_bytes().is_ok());
}

#[test]
fn create_without_nul_is_cut_to_63_bytes() {
    let mut b = Msg::Create(create()).to_bytes().unwrap();
    b[32..96].fill(b'x');
    let Msg::Create(c) = decode(&b).unwrap().0 else { panic!("not a create") };
    assert_eq!(c.cong_alg, Some("x".repeat(63)));

    // 64 invalid bytes become 64 U+FFFD (192 bytes), cut to 21 characters (63 bytes).
    b[32..96].fill(0xff);
    let Msg::Create(c) = decode(&b).unwrap().0 else { panic!("not a create") };
    assert_eq!(c.cong_alg, Some("\u{fffd}".repeat(21)));
}

#[test]
fn create_empty_name_is_none() {
    let mut b = Msg::Create(create()).to_bytes().unwrap();
    b[32] = 0;
    let Msg::Create(c) = decode(&b).unwrap().0 else { panic!("not a create") };
    assert_eq!(c.cong_alg, None);
}

// ---- MEASURE ---------------------------------------------------------------------------------

#[test]
fn measure_fields_not_multiple_of_eight() {
    let mut b = header(1, 27, 4);
    b.extend(7u32.to_le_bytes());
    b.extend(1u32.to_le_bytes());
    b.extend([0u8; 11]);
    assert_eq!(decode(&b), Err(DecodeError::LenMismatch { msg_type: 1, len: 27, expected: 24 }));
}

#[test]
fn measure_shorter_than_its_counts() {
    let mut b = header(1, 12, 4);
    b.extend(7u32.to_le_bytes());
    assert_eq!(decode(&b), Err(DecodeError::TooShort { msg_type: 1, len: 12, min: 16 }));
}

#[test]
fn measure_with_too_many_fields() {
    let mut b = header(1, 16, 4);
    b.extend(7u32.to_le_bytes());
    b.extend(u32::MAX.to_le_bytes());
    let (offset, error) = content_error(&b);
    assert_eq!(offset, 12);
    assert_eq!(error, ContentError::TooMany { what: "report fields", count: u64::from(u32::MAX), max: 110 });
}

// ---- INSTALL ---------------------------------------------------------------------------------

#[test]
fn install_arriving_as_bytes_decodes() {
    // portus hits `unimplemented!()` on this.
    let b = Msg::Install(install()).to_bytes().unwrap();
    assert_eq!(decode(&b).unwrap(), (Msg::Install(install()), b.len()));
}

#[test]
fn install_bad_opcode() {
    let mut b = Msg::Install(install()).to_bytes().unwrap();
    let instr1 = 20 + 16 + 16;
    b[instr1] = 15;
    assert_eq!(content_error(&b), (instr1, ContentError::Opcode { instr: 1, opcode: 15 }));
}

#[test]
fn install_bad_register_type() {
    let mut b = Msg::Install(install()).to_bytes().unwrap();
    let instr2 = 20 + 16 + 32;
    b[instr2 + 11] = 9;
    let slot = Slot::Instr { index: 2, operand: Operand::Right };
    assert_eq!(content_error(&b), (instr2 + 11, ContentError::RegType { slot, kind: 9 }));
}

#[test]
fn install_read_only_result() {
    for kind in [RegKind::Immediate, RegKind::Primitive] {
        let mut b = Msg::Install(install()).to_bytes().unwrap();
        let instr0 = 20 + 16;
        b[instr0 + 1] = kind as u8;
        assert_eq!(content_error(&b), (instr0 + 1, ContentError::ReadOnlyResult { instr: 0, kind }));
    }
}

#[test]
fn install_register_index_out_of_range() {
    let instr2 = 20 + 16 + 32;
    // Tmp 8, Local 8, Primitive 15: one past libccp's arrays / the primitive list.
    for (at, operand, kind, available) in [
        (1, Operand::Result, RegKind::Tmp, 8),
        (11, Operand::Right, RegKind::Local, 8),
        (6, Operand::Left, RegKind::Primitive, 15),
    ] {
        let mut b = Msg::Install(install()).to_bytes().unwrap();
        b[instr2 + at + 1] += 1;
        let slot = Slot::Instr { index: 2, operand };
        let index = available as u32;
        assert_eq!(content_error(&b), (instr2 + at, ContentError::RegIndex { slot, kind, index, available }));
    }
}

#[test]
fn install_immediate_out_of_range() {
    let mut b = Msg::Install(install()).to_bytes().unwrap();
    let instr1 = 20 + 16 + 16;
    b[instr1 + 12..instr1 + 16].copy_from_slice(&0x8000_0000u32.to_le_bytes());
    let slot = Slot::Instr { index: 1, operand: Operand::Right };
    assert_eq!(content_error(&b), (instr1 + 11, ContentError::Immediate { slot, value: 0x8000_0000 }));
}

#[test]
fn install_event_range_outside_instructions() {
    let mut b = Msg::Install(install()).to_bytes().unwrap();
    b[20 + 12] = 3; // body 1..1+3 > 3 instructions
    assert_eq!(
        content_error(&b),
        (28, ContentError::EventRange { event: 0, part: EventPart::Body, start: 1, count: 3, num_instrs: 3 })
    );
    let mut b = Msg::Install(install()).to_bytes().unwrap();
    b[20..24].copy_from_slice(&u32::MAX.to_le_bytes()); // no overflow in start + count
    let (offset, error) = content_error(&b);
    assert_eq!(offset, 20);
    assert!(matches!(error, ContentError::EventRange { part: EventPart::Condition, .. }));
}

#[test]
fn install_count_limits() {
    // 256 instructions would make libccp's u8 instruction index wrap and loop forever.
    let mut b = header(2, 20, 0);
    b.extend([1, 0, 0, 0, 0, 0, 0, 0]);
    b.extend(256u32.to_le_bytes());
    let (offset, error) = content_error(&b);
    assert_eq!(offset, 16);
    assert_eq!(error, ContentError::TooMany { what: "instructions", count: 256, max: 255 });

    let mut b = header(2, 20, 0);
    b.extend([1, 0, 0, 0]);
    b.extend(257u32.to_le_bytes());
    b.extend([0, 0, 0, 0]);
    assert_eq!(content_error(&b).1, ContentError::TooMany { what: "events", count: 257, max: 256 });
}

#[test]
fn install_len_mismatch() {
    let mut b = Msg::Install(install()).to_bytes().unwrap();
    b.truncate(b.len() - 1);
    let len = b.len() as u16;
    b[2..4].copy_from_slice(&len.to_le_bytes());
    assert_eq!(decode(&b), Err(DecodeError::LenMismatch { msg_type: 2, len, expected: 84 }));
}

// ---- UPDATE_FIELDS / CHANGE_PROG --------------------------------------------------------------

fn update_fields(fields: Vec<UpdateField>) -> Msg {
    Msg::UpdateFields(UpdateFields { sid: 2, fields })
}

fn control(index: u32, value: u64) -> UpdateField {
    UpdateField { kind: RegKind::NonVolatileControl, index, value }
}

#[test]
fn update_fields_arriving_as_bytes_decodes() {
    // portus hits `unimplemented!()` on this.
    let m = update_fields(vec![control(0, 1), control(109, 2)]);
    let b = m.to_bytes().unwrap();
    assert_eq!(decode(&b).unwrap(), (m, 38));
}

#[test]
fn update_fields_count_byte() {
    // libccp reads only the count's first byte (as a char): 128 updates would be read as
    // -128 => refused on x86 user space, and 256 as 0. We refuse both in both directions.
    let m = update_fields((0..128).map(|i| control(i % 110, 0)).collect());
    assert_eq!(
        m.to_bytes(),
        Err(EncodeError::Content { msg_type: 3, error: ContentError::TooMany { what: "updates", count: 128, max: 127 } })
    );
    let ok = update_fields((0..127).map(|i| control(i % 110, 0)).collect());
    let mut b = ok.to_bytes().unwrap();
    assert_eq!(b[8..12], [127, 0, 0, 0]);
    b[8] = 128;
    assert_eq!(content_error(&b).1, ContentError::TooMany { what: "updates", count: 128, max: 127 });
}

#[test]
fn update_targets() {
    let slot = Slot::Update(1);
    for (kind, index, want) in [
        (RegKind::Local, 0, ContentError::UpdateTarget { update: 1, kind: RegKind::Local, index: 0 }),
        (RegKind::Implicit, implicit::MICROS, ContentError::UpdateTarget { update: 1, kind: RegKind::Implicit, index: 3 }),
        (
            RegKind::VolatileControl,
            110,
            ContentError::RegIndex { slot, kind: RegKind::VolatileControl, index: 110, available: 110 },
        ),
    ] {
        let bad = UpdateField { kind, index, value: 5 };
        let m = update_fields(vec![control(0, 1), bad]);
        assert_eq!(m.to_bytes(), Err(EncodeError::Content { msg_type: 3, error: want }));
        // The same bytes, forged, are refused by the decoder at the update's offset.
        let mut b = update_fields(vec![control(0, 1), control(0, 5)]).to_bytes().unwrap();
        b[25] = kind as u8;
        b[26..30].copy_from_slice(&index.to_le_bytes());
        assert_eq!(content_error(&b), (25, want));
    }
}

#[test]
fn update_bad_register_type() {
    let mut b = update_fields(vec![control(0, 1)]).to_bytes().unwrap();
    b[12] = 200;
    assert_eq!(content_error(&b), (12, ContentError::RegType { slot: Slot::Update(0), kind: 200 }));
}

#[test]
fn change_prog_count_limit() {
    let m =
        |n: u32| Msg::ChangeProg(ChangeProg { sid: 1, program_uid: 2, updates: (0..n).map(|i| control(i % 110, 0)).collect() });
    assert!(m(222).to_bytes().is_ok());
    assert!(matches!(m(223).to_bytes(), Err(EncodeError::Content { error: ContentError::TooMany { max: 222, .. }, .. })));
}

// ---- decode_all --------------------------------------------------------------------------------

#[test]
fn decode_all_skips_what_it_can_and_stops_when_lost() {
    let ready = Msg::Ready(Ready { datapath_id: 1 });
    let measure = Msg::Measure(Measure { sid: 1, program_uid: 2, fields: vec![3] });
    let mut buf = ready.to_bytes().unwrap();
    buf.extend(header(42, 10, 0));
    buf.extend([0, 0]);
    let bad_measure = {
        let mut b = measure.to_bytes().unwrap();
        b[12] = 2; // claims two fields in a one-field message
        b
    };
    buf.extend(&bad_measure);
    buf.extend(measure.to_bytes().unwrap());
    buf.extend(header(1, 200, 0)); // length beyond the datagram: stop here
    buf.extend(ready.to_bytes().unwrap());

    let got: Vec<_> = decode_all(&buf).collect();
    assert_eq!(got.len(), 5);
    assert_eq!(got[0], Ok(ready));
    assert_eq!(got[1], Err(DecodeError::UnknownType { msg_type: 42, len: 10 }));
    assert_eq!(got[2], Err(DecodeError::LenMismatch { msg_type: 1, len: 24, expected: 32 }));
    assert_eq!(got[3], Ok(measure));
    assert!(matches!(got[4], Err(DecodeError::LenBeyondBuffer { len: 200, .. })));
}

#[test]
fn decode_all_stops_on_trailing_garbage() {
    let mut buf = Msg::Ready(Ready { datapath_id: 1 }).to_bytes().unwrap();
    buf.extend([0, 0, 0]);
    let got: Vec<_> = decode_all(&buf).collect();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1], Err(DecodeError::ShortHeader { available: 3 }));
    assert!(decode_all(&[]).next().is_none());
}

// ---- encoder refusals -------------------------------------------------------------------------

#[test]
fn encode_cong_alg_rules() {
    let with = |name: &str| Msg::Create(Create { cong_alg: Some(name.into()), ..create() });
    assert!(with(&"a".repeat(63)).to_bytes().is_ok());
    assert_eq!(with(&"a".repeat(64)).to_bytes(), Err(EncodeError::CongAlgTooLong { len: 64 }));
    assert_eq!(with("").to_bytes(), Err(EncodeError::CongAlgEmpty));
    assert_eq!(with("re\0no").to_bytes(), Err(EncodeError::CongAlgNul { pos: 2 }));
}

#[test]
fn encode_count_limits() {
    let measure = Msg::Measure(Measure { sid: 1, program_uid: 1, fields: vec![0; 111] });
    assert!(matches!(
        measure.to_bytes(),
        Err(EncodeError::Content { msg_type: 1, error: ContentError::TooMany { max: 110, .. } })
    ));
    let filler = install().instrs[0];
    let mut big = install();
    big.instrs = vec![filler; 256];
    assert!(matches!(
        Msg::Install(big.clone()).to_bytes(),
        Err(EncodeError::Content { error: ContentError::TooMany { what: "instructions", .. }, .. })
    ));
    big.instrs.truncate(255);
    big.events = vec![big.events[0]; 256];
    let b = Msg::Install(big.clone()).to_bytes().unwrap();
    assert_eq!(b.len(), 20 + 16 * (256 + 255));
    big.events.push(big.events[0]);
    assert!(matches!(
        Msg::Install(big).to_bytes(),
        Err(EncodeError::Content { error: ContentError::TooMany { what: "events", .. }, .. })
    ));
}

#[test]
fn encode_checks_program_content() {
    let mut p = install();
    p.instrs[2].res = Reg::imm(3);
    assert_eq!(
        Msg::Install(p).to_bytes(),
        Err(EncodeError::Content { msg_type: 2, error: ContentError::ReadOnlyResult { instr: 2, kind: RegKind::Immediate } })
    );
    let mut p = install();
    p.instrs[0].right = Reg::imm(1 << 31);
    assert!(matches!(
        Msg::Install(p).to_bytes(),
        Err(EncodeError::Content { error: ContentError::Immediate { value: 0x8000_0000, .. }, .. })
    ));
    let mut p = install();
    p.events[0].num_flag_instrs = 4;
    assert!(matches!(Msg::Install(p).to_bytes(), Err(EncodeError::Content { error: ContentError::EventRange { .. }, .. })));
    let mut p = install();
    p.instrs[1].left = Reg::new(RegKind::NonVolatileReport, 110);
    assert!(matches!(
        Msg::Install(p).to_bytes(),
        Err(EncodeError::Content { error: ContentError::RegIndex { index: 110, .. }, .. })
    ));
}

#[test]
fn failed_encode_leaves_buffer_alone() {
    let mut out = vec![1, 2, 3];
    let bad = Msg::Measure(Measure { sid: 1, program_uid: 1, fields: vec![0; 200] });
    assert!(bad.encode(&mut out).is_err());
    assert_eq!(out, [1, 2, 3]);
    Msg::Ready(Ready { datapath_id: 4 }).encode(&mut out).unwrap();
    assert_eq!(out.len(), 3 + 12);
}

#[test]
fn sid_of_each_message() {
    assert_eq!(Msg::Create(create()).sid(), 9);
    assert_eq!(Msg::Install(install()).sid(), 0);
    assert_eq!(Msg::Ready(Ready { datapath_id: 5 }).sid(), 0);
    assert_eq!(update_fields(vec![]).sid(), 2);
}

#[test]
fn error_messages_say_what_and_where() {
    let mut b = Msg::Install(install()).to_bytes().unwrap();
    b[20 + 16 + 16] = 99;
    assert_eq!(
        decode(&b).unwrap_err().to_string(),
        "INSTALL message (84 bytes), byte 52: instruction 1: unknown opcode 99 (valid: 0..=14)"
    );
    let mut b = header(1, 27, 4);
    b.extend([0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(decode(&b).unwrap_err().to_string(), "MEASURE message: header length 27, but its counts make it 24 bytes");
    let e = update_fields(vec![UpdateField { kind: RegKind::Tmp, index: 1, value: 0 }]).to_bytes().unwrap_err();
    assert_eq!(e.to_string(), "UPDATE_FIELDS message: update 0: libccp only updates control registers, Cwnd and Rate, not Tmp 1");
}

#[test]
fn limits_are_libccps() {
    assert_eq!(limits::MAX_UPDATE_FIELDS, 127);
    assert_eq!(limits::MAX_CHANGE_PROG_UPDATES, 222);
    assert_eq!(limits::MAX_CONG_ALG_LEN, 63);
}

// ---- netlink ---------------------------------------------------------------------------------

#[test]
fn netlink_frame_and_unframe() {
    let payload = Msg::Ready(Ready { datapath_id: 7 }).to_bytes().unwrap();
    let mut out = Vec::new();
    frame(&payload, &mut out);
    assert_eq!(out[..16], [28, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(unframe(&out), Ok(&payload[..]));
    // Trailing alignment padding is ignored; type/flags/seq/pid are not checked
    // (ccp-kernel sends nlmsg_type NLMSG_DONE = 3).
    out[4] = 3;
    out.extend([0, 0, 0]);
    assert_eq!(unframe(&out), Ok(&payload[..]));
}

#[test]
fn netlink_malformed() {
    assert_eq!(unframe(&[0; 15]), Err(DecodeError::NetlinkShort { available: 15 }));
    let mut b = vec![0u8; NLMSG_HDR_LEN + 4];
    b[0] = 15;
    assert_eq!(unframe(&b), Err(DecodeError::NetlinkLen { nlmsg_len: 15, available: 20 }));
    b[0] = 21;
    assert_eq!(unframe(&b), Err(DecodeError::NetlinkLen { nlmsg_len: 21, available: 20 }));
    b[0] = 16;
    assert_eq!(unframe(&b), Ok(&[][..]));
}
