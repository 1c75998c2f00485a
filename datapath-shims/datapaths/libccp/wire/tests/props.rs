//! Property tests: valid messages round-trip, and no byte string makes the decoder panic.

use ccp_wire::netlink::{frame, unframe, NLMSG_HDR_LEN};
use ccp_wire::{
    decode, decode_all, implicit, limits, ChangeProg, Create, DecodeError, Event, Install, Instr, Measure, Msg, Op, Primitive,
    Ready, Reg, RegKind, UpdateField, UpdateFields,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

const KINDS: [RegKind; 9] = [
    RegKind::NonVolatileControl,
    RegKind::Immediate,
    RegKind::Implicit,
    RegKind::Local,
    RegKind::Primitive,
    RegKind::VolatileReport,
    RegKind::NonVolatileReport,
    RegKind::Tmp,
    RegKind::VolatileControl,
];

fn capacity(kind: RegKind) -> u32 {
    let n = match kind {
        RegKind::NonVolatileControl | RegKind::VolatileControl => limits::MAX_CONTROL_REGS,
        RegKind::Implicit => limits::MAX_IMPLICIT_REGS,
        RegKind::Local => limits::MAX_LOCAL_REGS,
        RegKind::Primitive => Primitive::ALL.len(),
        RegKind::VolatileReport | RegKind::NonVolatileReport => limits::MAX_REPORT_REGS,
        RegKind::Tmp => limits::MAX_TMP_REGS,
        RegKind::Immediate => unreachable!("immediates carry values"),
    };
    n as u32
}

fn reg_of(kind: RegKind) -> BoxedStrategy<Reg> {
    match kind {
        RegKind::Immediate => prop_oneof![0..=limits::MAX_IMMEDIATE, Just(limits::INFINITY)].prop_map(Reg::imm).boxed(),
        k => (0..capacity(k)).prop_map(move |i| Reg::new(k, i)).boxed(),
    }
}

fn any_reg() -> impl Strategy<Value = Reg> {
    select(&KINDS[..]).prop_flat_map(reg_of)
}

fn writable_reg() -> impl Strategy<Value = Reg> {
    let writable: Vec<RegKind> = KINDS.into_iter().filter(|k| !matches!(k, RegKind::Immediate | RegKind::Primitive)).collect();
    select(writable).prop_flat_map(reg_of)
}

fn instr() -> impl Strategy<Value = Instr> {
    (select(&Op::ALL[..]), writable_reg(), any_reg(), any_reg()).prop_map(|(op, res, left, right)| Instr { op, res, left, right })
}

fn range(n: u32) -> impl Strategy<Value = (u32, u32)> {
    (0..=n).prop_flat_map(move |start| (Just(start), 0..=n - start))
}

fn event(n: u32) -> impl Strategy<Value = Event> {
    (range(n), range(n)).prop_map(|((flag_idx, num_flag_instrs), (body_idx, num_body_instrs))| Event {
        flag_idx,
        num_flag_instrs,
        body_idx,
        num_body_instrs,
    })
}

fn install() -> impl Strategy<Value = Install> {
    let instrs = prop_oneof![
        4 => vec(instr(), 0..=24),
        1 => vec(instr(), 200..=limits::MAX_INSTRUCTIONS),
    ];
    (any::<u32>(), instrs).prop_flat_map(|(program_uid, instrs)| {
        let n = instrs.len() as u32;
        let events = prop_oneof![
            4 => vec(event(n), 0..=8),
            1 => vec(event(n), 240..=limits::MAX_EVENTS),
        ];
        (Just(program_uid), events, Just(instrs)).prop_map(|(program_uid, events, instrs)| Install {
            program_uid,
            events,
            instrs,
        })
    })
}

fn update() -> impl Strategy<Value = UpdateField> {
    let target = prop_oneof![
        (select(vec![RegKind::NonVolatileControl, RegKind::VolatileControl]), 0..110u32),
        (Just(RegKind::Implicit), select(vec![implicit::CWND, implicit::RATE])),
    ];
    (target, any::<u64>()).prop_map(|((kind, index), value)| UpdateField { kind, index, value })
}

fn cong_alg() -> impl Strategy<Value = Option<String>> {
    // Up to 15 characters of at most 4 bytes each: never over 63 bytes; no NUL.
    proptest::option::of("[^\\x00]{1,15}|[a-z0-9_-]{63}")
}

fn msg() -> impl Strategy<Value = Msg> {
    prop_oneof![
        (any::<[u32; 7]>(), cong_alg()).prop_map(|(v, cong_alg)| Msg::Create(Create {
            sid: v[0],
            init_cwnd: v[1],
            mss: v[2],
            src_ip: v[3],
            src_port: v[4],
            dst_ip: v[5],
            dst_port: v[6],
            cong_alg,
        })),
        (any::<u32>(), any::<u32>(), vec(any::<u64>(), 0..=limits::MAX_REPORT_REGS))
            .prop_map(|(sid, program_uid, fields)| Msg::Measure(Measure { sid, program_uid, fields })),
        install().prop_map(Msg::Install),
        (any::<u32>(), vec(update(), 0..=limits::MAX_UPDATE_FIELDS))
            .prop_map(|(sid, fields)| Msg::UpdateFields(UpdateFields { sid, fields })),
        (any::<u32>(), any::<u32>(), vec(update(), 0..=limits::MAX_CHANGE_PROG_UPDATES))
            .prop_map(|(sid, program_uid, updates)| Msg::ChangeProg(ChangeProg { sid, program_uid, updates })),
        any::<u32>().prop_map(|datapath_id| Msg::Ready(Ready { datapath_id })),
    ]
}

/// Whatever decoded must encode again to something that decodes to the same message.
fn assert_reencodes(m: &Msg) {
    let bytes = m.to_bytes().expect("a decoded message encodes");
    assert_eq!(decode(&bytes), Ok((m.clone(), bytes.len())));
}

fn exercise(bytes: &[u8]) {
    if let Ok((m, used)) = decode(bytes) {
        assert!((8..=bytes.len()).contains(&used));
        assert_reencodes(&m);
    }
    for m in decode_all(bytes).flatten() {
        assert_reencodes(&m);
    }
    if let Ok(payload) = unframe(bytes) {
        assert!(payload.len() + NLMSG_HDR_LEN <= bytes.len());
        for m in decode_all(payload).flatten() {
            assert_reencodes(&m);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn valid_messages_round_trip(m in msg()) {
        let bytes = m.to_bytes().unwrap();
        prop_assert_eq!(u16::from_le_bytes([bytes[2], bytes[3]]) as usize, bytes.len());
        prop_assert_eq!(u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]), m.sid());
        prop_assert_eq!(decode(&bytes), Ok((m.clone(), bytes.len())));
        // Trailing bytes are left for the next message.
        let mut longer = bytes.clone();
        longer.extend([0xab; 5]);
        prop_assert_eq!(decode(&longer), Ok((m, bytes.len())));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..300)) {
        exercise(&bytes);
    }

    /// Arbitrary bodies behind a plausible header reach the per-type decoders far more often.
    #[test]
    fn arbitrary_bodies_never_panic(t in 0u16..8, sid: u32, body in vec(any::<u8>(), 0..300)) {
        let len = (8 + body.len()) as u16;
        let mut bytes = Vec::new();
        bytes.extend(t.to_le_bytes());
        bytes.extend(len.to_le_bytes());
        bytes.extend(sid.to_le_bytes());
        bytes.extend(&body);
        exercise(&bytes);
    }

    #[test]
    fn every_truncation_errors_cleanly(m in msg()) {
        let bytes = m.to_bytes().unwrap();
        for cut in 0..bytes.len() {
            let err = decode(&bytes[..cut]).unwrap_err();
            prop_assert!(
                matches!(err, DecodeError::ShortHeader { .. } | DecodeError::LenBeyondBuffer { .. }),
                "cut {}: {:?}", cut, err
            );
            prop_assert!(decode_all(&bytes[..cut]).all(|r| r.is_err()));
        }
    }

}

proptest! {
    // Each case decodes its message once per byte position (up to ~8 KiB for large programs).
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_single_byte_corruption_is_handled(m in msg(), value: u8, pick in any::<prop::sample::Index>()) {
        let bytes = m.to_bytes().unwrap();
        // Each position set to one random value, then one random position set to every value.
        for at in 0..bytes.len() {
            let mut b = bytes.clone();
            b[at] = value;
            exercise(&b);
        }
        let at = pick.index(bytes.len());
        for v in 0..=255u8 {
            let mut b = bytes.clone();
            b[at] = v;
            exercise(&b);
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn concatenated_messages_decode_in_order(ms in vec(msg(), 0..6)) {
        let mut buf = Vec::new();
        for m in &ms {
            m.encode(&mut buf).unwrap();
        }
        let got: Vec<Msg> = decode_all(&buf).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(got, ms);
    }

    #[test]
    fn netlink_round_trip(payload in vec(any::<u8>(), 0..200), pad in 0usize..4) {
        let mut out = vec![0xee];
        frame(&payload, &mut out);
        prop_assert_eq!(out.len(), 1 + NLMSG_HDR_LEN + payload.len());
        out.extend(std::iter::repeat_n(0, pad));
        prop_assert_eq!(unframe(&out[1..]), Ok(&payload[..]));
    }
}
