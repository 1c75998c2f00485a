//! libccp's error codes. The crate's `LibccpError` names a failure but not the `ccp_error.h`
//! code that libccp's own logs and documentation use, so messages quote both.

use libccp::LibccpError;

/// "error -71 (LibccpUnknownConnection)".
pub fn describe(e: &LibccpError) -> String {
    match code(e) {
        Some(code) => format!("error {code} ({e:?})"),
        None => format!("an error the libccp crate could not map to a code ({e:?})"),
    }
}

/// The `ccp_error.h` code of an error, if it has one.
pub fn code(e: &LibccpError) -> Option<i32> {
    use LibccpError::*;
    Some(match e {
        OtherError(_) => return None,
        LibccpOk => 0,
        LibccpMissingArg => -11,
        LibccpNullArg => -12,
        LibccpBufsizeNegative => -21,
        LibccpBufsizeTooSmall => -22,
        LibccpMsgTooLong => -23,
        LibccpWriteInvalidHeaderType => -31,
        LibccpReadInvalidHeaderType => -32,
        LibccpReadInvalidOp => -33,
        LibccpReadRegNotAllowed => -34,
        LibccpReadInvalidReturnReg => -35,
        LibccpReadInvalidLeftReg => -36,
        LibccpReadInvalidRightReg => -37,
        LibccpInstallTypeMismatch => -41,
        LibccpInstallTooManyExpr => -42,
        LibccpInstallTooManyInstr => -43,
        LibccpUpdateTypeMismatch => -51,
        LibccpUpdateTooMany => -52,
        LibccpUpdateInvalidRegType => -53,
        LibccpChangeTypeMismatch => -61,
        LibccpChangeTooMany => -62,
        LibccpUnknownConnection => -71,
        LibccpCreatePending => -72,
        LibccpConnectionNotInitialized => -73,
        LibccpProgTableFull => -81,
        LibccpProgNotFound => -82,
        LibccpAddIntOverflow => -91,
        LibccpDivByZero => -92,
        LibccpMulIntOverflow => -93,
        LibccpSubIntUnderflow => -94,
        LibccpPrivIsNull => -95,
        LibccpProgIsNull => -96,
        LibccpFallbackTimedOut => -101,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_their_ccp_error_h_codes() {
        assert_eq!(describe(&LibccpError::LibccpUnknownConnection), "error -71 (LibccpUnknownConnection)");
        assert_eq!(code(&LibccpError::LibccpSubIntUnderflow), Some(-94));
        assert_eq!(code(&LibccpError::OtherError("x")), None);
        assert!(describe(&LibccpError::OtherError("x")).contains("could not map"));
    }
}
