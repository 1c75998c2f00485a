//! Feeds arbitrary bytes to every decoding entry point (as a libccp message stream and as a
//! netlink datagram). Decoding must never panic, and every message it accepts must encode
//! again, decode to itself, and — apart from the fields the codec deliberately does not keep —
//! reproduce the very bytes it was decoded from.
#![no_main]

use ccp_wire::netlink::unframe;
use ccp_wire::{decode, decode_all, Msg};
use libfuzzer_sys::fuzz_target;

fn check_stream(bytes: &[u8]) {
    let mut rest = bytes;
    let mut from_decode = Vec::new();
    while let Ok((msg, used)) = decode(rest) {
        assert!(used >= 8 && used <= rest.len());
        check_canonical(&msg, &rest[..used]);
        from_decode.push(msg);
        rest = &rest[used..];
    }
    // decode_all yields the same messages in the same order (it may find more after errors).
    let from_all: Vec<Msg> = decode_all(bytes).map_while(Result::ok).collect();
    assert_eq!(from_all, from_decode);
    for msg in decode_all(bytes).flatten() {
        let encoded = msg.to_bytes().expect("a decoded message must encode");
        assert_eq!(decode(&encoded), Ok((msg, encoded.len())));
    }
}

/// Re-encoding gives back the original bytes, except INSTALL's and READY's sock_id (ignored by
/// libccp, encoded as 0) and CREATE's congAlg field (cut at its NUL, lossily converted).
fn check_canonical(msg: &Msg, original: &[u8]) {
    let encoded = msg.to_bytes().expect("a decoded message must encode");
    assert_eq!(decode(&encoded), Ok((msg.clone(), encoded.len())));
    assert_eq!(encoded.len(), original.len());
    let mut expected = original.to_vec();
    match msg {
        Msg::Install(_) | Msg::Ready(_) => expected[4..8].fill(0),
        Msg::Create(_) => expected[32..].copy_from_slice(&encoded[32..]),
        _ => {}
    }
    assert_eq!(encoded, expected);
}

fuzz_target!(|data: &[u8]| {
    check_stream(data);
    if let Ok(payload) = unframe(data) {
        check_stream(payload);
    }
});
