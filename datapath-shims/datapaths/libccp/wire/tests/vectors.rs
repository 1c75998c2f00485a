//! Exact byte vectors from libccp 1.2's Rust crate tests (`src/lib.rs`) and portus 0.9's unit
//! tests (`src/serialize/*.rs`, `src/lang/serialize.rs`). Where those tests only round-trip a
//! struct, the bytes below were written out by hand from the C layout.

use ccp_wire::{
    decode, implicit, ChangeProg, Create, DecodeError, Event, Install, Instr, Measure, Msg, Op, Ready, Reg, RegKind, UpdateField,
    UpdateFields,
};

/// Decodes `bytes` to `expected` (consuming all of them) and encodes `expected` back to `bytes`.
fn check(bytes: &[u8], expected: Msg) {
    let (got, used) = decode(bytes).expect("decode");
    assert_eq!(got, expected);
    assert_eq!(used, bytes.len());
    assert_eq!(expected.to_bytes().expect("encode"), bytes);
}

/// For INSTALL: libccp ignores the header's sock_id and we encode it as 0, so the encoding equals
/// the vector with bytes 4..8 zeroed.
fn check_sid_ignored(bytes: &[u8], expected: Msg) {
    let (got, used) = decode(bytes).expect("decode");
    assert_eq!(got, expected);
    assert_eq!(used, bytes.len());
    let mut canonical = bytes.to_vec();
    canonical[4..8].fill(0);
    assert_eq!(expected.to_bytes().expect("encode"), canonical);
}

fn reg(kind: RegKind, index: u32) -> Reg {
    Reg::new(kind, index)
}

fn instr(op: Op, res: Reg, left: Reg, right: Reg) -> Instr {
    Instr { op, res, left, right }
}

// ---- libccp 1.2 crate tests ------------------------------------------------------------------

#[test]
fn libccp_create() {
    #[rustfmt::skip]
    let mut bytes = vec![
        0x00, 0x00, 0x60, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x64, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
        0x03, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
    ];
    bytes.extend([0u8; 64]);
    check(
        &bytes,
        Msg::Create(Create { sid: 1, init_cwnd: 100, mss: 10, src_ip: 1, src_port: 2, dst_ip: 3, dst_port: 4, cong_alg: None }),
    );
}

#[test]
fn libccp_ready() {
    let bytes = [0x05, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0xaa, 0x00, 0x00, 0x00];
    check(&bytes, Msg::Ready(Ready { datapath_id: 0xaa }));
}

#[test]
fn libccp_close_is_empty_measure() {
    let bytes = [0x01, 0, 16, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let close = Measure { sid: 1, program_uid: 0, fields: vec![] };
    assert!(close.is_close());
    check(&bytes, Msg::Measure(close));
}

#[test]
fn libccp_report() {
    #[rustfmt::skip]
    let bytes = [
        0x01, 0x00, 0x18, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    check(&bytes, Msg::Measure(Measure { sid: 1, program_uid: 5, fields: vec![1] }));
}

/// The install messages of libccp's `primitives` and `basic` tests differ only in one operand.
fn libccp_install(uid: u8, plus_right: [u8; 5]) -> Vec<u8> {
    #[rustfmt::skip]
    let mut bytes = vec![
        2, 0, 116, 0, 1, 0, 0, 0,
        uid, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0,
        1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0,
        2, 5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 1, 0, 0, 0, 0,
        1, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 1, 0, 0, 0,
        0, 7, 0, 0, 0, 0, 5, 0, 0, 0, 0,
    ];
    bytes.extend(plus_right);
    #[rustfmt::skip]
    bytes.extend([
        1, 5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 7, 0, 0, 0, 0,
        1, 2, 2, 0, 0, 0, 2, 2, 0, 0, 0, 1, 1, 0, 0, 0,
    ]);
    bytes
}

fn libccp_program(uid: u32, plus_right: Reg) -> Msg {
    let report_foo = reg(RegKind::VolatileReport, 0);
    let flag = reg(RegKind::Implicit, implicit::EXPR_FLAG);
    let should_report = reg(RegKind::Implicit, implicit::SHOULD_REPORT);
    let tmp0 = reg(RegKind::Tmp, 0);
    Msg::Install(Install {
        program_uid: uid,
        events: vec![Event { flag_idx: 1, num_flag_instrs: 1, body_idx: 2, num_body_instrs: 3 }],
        instrs: vec![
            instr(Op::Def, report_foo, report_foo, Reg::imm(0)),
            instr(Op::Bind, flag, flag, Reg::imm(1)),
            instr(Op::Add, tmp0, report_foo, plus_right),
            instr(Op::Bind, report_foo, report_foo, tmp0),
            instr(Op::Bind, should_report, should_report, Reg::imm(1)),
        ],
    })
}

#[test]
fn libccp_install_primitives() {
    // (+ Report.foo Ack.bytes_acked)
    let bytes = libccp_install(5, [4, 0, 0, 0, 0]);
    check_sid_ignored(&bytes, libccp_program(5, reg(RegKind::Primitive, 0)));
}

#[test]
fn libccp_install_basic() {
    // (+ Report.foo 1)
    let bytes = libccp_install(4, [1, 1, 0, 0, 0]);
    check_sid_ignored(&bytes, libccp_program(4, Reg::imm(1)));
}

/// libccp's own tests send CHANGE_PROG with header length 12 but 16 bytes of content; libccp
/// never compares the two. We refuse the inconsistent length and accept the consistent one.
#[test]
fn libccp_change_prog_with_short_len() {
    let mut bytes = vec![4, 0, 12, 0, 1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(decode(&bytes), Err(DecodeError::TooShort { msg_type: 4, len: 12, min: 16 }));
    bytes[2] = 16;
    check(&bytes, Msg::ChangeProg(ChangeProg { sid: 1, program_uid: 5, updates: vec![] }));
}

// ---- portus 0.9 unit tests -------------------------------------------------------------------

#[test]
fn portus_install() {
    // serialize/install.rs: (def (Report (volatile foo 0))) (when true (bind Report.foo 4)), sid 1
    #[rustfmt::skip]
    let bytes = [
        2, 0, 84, 0, 1, 0, 0, 0,
        7, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0,
        1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0,
        2, 5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 1, 0, 0, 0, 0,
        1, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 1, 0, 0, 0,
        1, 5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 1, 4, 0, 0, 0,
    ];
    let foo = reg(RegKind::VolatileReport, 0);
    let flag = reg(RegKind::Implicit, implicit::EXPR_FLAG);
    check_sid_ignored(
        &bytes,
        Msg::Install(Install {
            program_uid: 7,
            events: vec![Event { flag_idx: 1, num_flag_instrs: 1, body_idx: 2, num_body_instrs: 1 }],
            instrs: vec![
                instr(Op::Def, foo, foo, Reg::imm(0)),
                instr(Op::Bind, flag, flag, Reg::imm(1)),
                instr(Op::Bind, foo, foo, Reg::imm(4)),
            ],
        }),
    );
}

#[test]
fn portus_lang_serialize_instructions() {
    // lang/serialize.rs do_ser_max_imm and do_ser_def_max_imm, wrapped in an INSTALL.
    #[rustfmt::skip]
    let bytes = [
        2, 0, 52, 0, 0, 0, 0, 0,
        9, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0,
        0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0xff, 0xff, 0x3f, 0x01, 0xff, 0xff, 0xff, 0x3f,
        0x02, 0x05, 0x02, 0x00, 0x00, 0x00, 0x05, 0x02, 0x00, 0x00, 0x00, 0x01, 0xff, 0xff, 0xff, 0xff,
    ];
    let report2 = reg(RegKind::VolatileReport, 2);
    check(
        &bytes,
        Msg::Install(Install {
            program_uid: 9,
            events: vec![],
            instrs: vec![
                instr(Op::Add, reg(RegKind::Tmp, 0), Reg::imm(0x3fff_ffff), Reg::imm(0x3fff_ffff)),
                instr(Op::Def, report2, report2, Reg::imm(u32::MAX)),
            ],
        }),
    );
}

#[test]
fn portus_change_prog() {
    #[rustfmt::skip]
    let bytes = [
        4, 0, 29, 0, 1, 0, 0, 0,
        7, 0, 0, 0, 1, 0, 0, 0,
        2, 4, 0, 0, 0, 0x2a, 0, 0, 0, 0, 0, 0, 0,
    ];
    check(
        &bytes,
        Msg::ChangeProg(ChangeProg {
            sid: 1,
            program_uid: 7,
            updates: vec![UpdateField { kind: RegKind::Implicit, index: implicit::CWND, value: 42 }],
        }),
    );
}

#[test]
fn portus_update_field() {
    #[rustfmt::skip]
    let bytes = [
        3, 0, 25, 0, 1, 0, 0, 0,
        1, 0, 0, 0,
        2, 4, 0, 0, 0, 0x2a, 0, 0, 0, 0, 0, 0, 0,
    ];
    check(
        &bytes,
        Msg::UpdateFields(UpdateFields {
            sid: 1,
            fields: vec![UpdateField { kind: RegKind::Implicit, index: implicit::CWND, value: 42 }],
        }),
    );
}

#[test]
fn portus_measure_1() {
    #[rustfmt::skip]
    let bytes = [
        0x01, 0x00, 0x38, 0x00, 0x0f, 0x00, 0x00, 0x00,
        0x48, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
        0x32, 0x79, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xfa, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x40, 0x0d, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xf0, 0x49, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    check(&bytes, Msg::Measure(Measure { sid: 15, program_uid: 72, fields: vec![424242, 65535, 65530, 200000, 150000] }));
}

#[test]
fn portus_measure_2() {
    #[rustfmt::skip]
    let bytes = [
        0x01, 0x00, 0x38, 0x00, 0x00, 0x01, 0x00, 0x00,
        0x13, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
        0xb2, 0x57, 0x87, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xfb, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xa0, 0x86, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x50, 0xc3, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    check(&bytes, Msg::Measure(Measure { sid: 256, program_uid: 19, fields: vec![42424242, 65536, 65531, 100000, 50000] }));
}

#[test]
fn portus_measure_3() {
    let mut bytes = vec![0x01, 0x00, 0x10, 0x01, 0x20, 0, 0, 0, 0x03, 0, 0, 0, 0x20, 0, 0, 0];
    for _ in 0..32 {
        bytes.extend([0xb2, 0x57, 0x87, 0x02, 0, 0, 0, 0]);
    }
    check(&bytes, Msg::Measure(Measure { sid: 32, program_uid: 3, fields: vec![42424242; 32] }));
}

#[test]
fn portus_create() {
    #[rustfmt::skip]
    let mut bytes = vec![
        0x00, 0x00, 0x60, 0x00, 0x0f, 0x00, 0x00, 0x00,
        0x90, 0x38, 0x00, 0x00, 0xa8, 0x05, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x92, 0x10, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x92, 0x10, 0x00, 0x00,
    ];
    bytes.extend([0u8; 64]);
    check(
        &bytes,
        Msg::Create(Create {
            sid: 15,
            init_cwnd: 1448 * 10,
            mss: 1448,
            src_ip: 0,
            src_port: 4242,
            dst_ip: 0,
            dst_port: 4242,
            cong_alg: None,
        }),
    );
}

#[test]
fn portus_ready() {
    check(&[5, 0, 12, 0, 0, 0, 0, 0, 7, 0, 0, 0], Msg::Ready(Ready { datapath_id: 7 }));
}

#[test]
fn ccp_kernel_create_with_reno() {
    // ccp-kernel hard-codes congAlg "reno"; the rest of the 64-byte field is zero.
    let mut bytes = vec![0, 0, 0x60, 0, 3, 0, 0, 0];
    bytes.extend([0xa8, 0x38, 0, 0, 0xa8, 0x05, 0, 0]); // init_cwnd 14504, mss 1448
    bytes.extend([0x0a, 0, 0, 0x01, 0x1f, 0x90, 0, 0]); // 10.0.0.1 (network order), port 0x901f
    bytes.extend([0x0a, 0, 0, 0x02, 0x14, 0x51, 0, 0]); // 10.0.0.2, port 0x5114
    bytes.extend(b"reno");
    bytes.extend([0u8; 60]);
    check(
        &bytes,
        Msg::Create(Create {
            sid: 3,
            init_cwnd: 14504,
            mss: 1448,
            src_ip: 0x0100_000a,
            src_port: 0x901f,
            dst_ip: 0x0200_000a,
            dst_port: 0x5114,
            cong_alg: Some("reno".to_string()),
        }),
    );
}
