//! Bearer tokens: reading the `Authorization` header, hashing tokens, and matching a hash
//! against the configured ones in constant time.
//!
//! The header is attacker-controlled input. Anything but exactly one `Authorization` header
//! of the form `Bearer <token>` (scheme in any case, the token as
//! [`lock_api::limits::validate_token`] wants it: visible ASCII, at most 1 KiB) is
//! malformed, which the caller answers like an unknown token.

use axum::http::{header, HeaderMap};
use sha2::{Digest, Sha256};
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

/// A SHA-256 digest.
pub type TokenHash = [u8; 32];

/// What a request's `Authorization` header holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presented<'a> {
    /// No `Authorization` header.
    Nothing,
    /// Several headers, another scheme, an empty or oversized token, bytes outside visible
    /// ASCII.
    Malformed,
    /// `Bearer <token>`.
    Token(&'a str),
}

/// Reads the bearer token of a request.
pub fn presented(headers: &HeaderMap) -> Presented<'_> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Presented::Nothing;
    };
    // Two headers could be read differently by a proxy in front and by us: refuse both.
    if values.next().is_some() {
        return Presented::Malformed;
    }
    let Ok(value) = value.to_str() else {
        return Presented::Malformed;
    };
    let Some((scheme, token)) = value.split_once(' ') else {
        return Presented::Malformed;
    };
    let token = token.trim_start_matches(' ');
    if !scheme.eq_ignore_ascii_case("bearer") || !is_token(token) {
        return Presented::Malformed;
    }
    Presented::Token(token)
}

/// Whether `token` can be a bearer token (longer ones are refused without being hashed).
pub fn is_token(token: &str) -> bool {
    lock_api::limits::validate_token(token).is_ok()
}

/// SHA-256 of a token.
pub fn hash(token: &str) -> TokenHash {
    Sha256::digest(token.as_bytes()).into()
}

/// Lowercase hex of a hash, as the auth file spells it.
pub fn to_hex(hash: &TokenHash) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// The index of the entry of `known` equal to `presented`, if any, in constant time.
///
/// Why it is written this way: comparing the presented token with a stored one byte by
/// byte, stopping at the first difference, answers faster the longer the matching prefix,
/// and an attacker who measures enough answers can guess a token one byte at a time. Here
/// (1) the token is hashed first, so what is compared is a fixed-length digest the attacker
/// cannot steer byte by byte (a matching digest prefix says nothing usable about the
/// token); (2) each digest comparison takes the same time whatever the bytes (`subtle`); and
/// (3) every entry is compared, with no early exit when one matches, so the time depends on
/// the number of clients only, not on which one (or whether any) matched.
pub fn find(presented: &TokenHash, known: &[TokenHash]) -> Option<usize> {
    let mut found = Choice::from(0);
    let mut index = 0u32;
    for (i, candidate) in known.iter().enumerate() {
        let equal = candidate.ct_eq(presented);
        index.conditional_assign(&(i as u32), equal);
        found |= equal;
    }
    bool::from(found).then_some(index as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(values: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::AUTHORIZATION, HeaderValue::from_bytes(v).unwrap());
        }
        h
    }

    #[test]
    fn only_one_well_formed_bearer_header_carries_a_token() {
        assert_eq!(presented(&headers(&[])), Presented::Nothing);
        assert_eq!(
            presented(&headers(&[b"Bearer abc"])),
            Presented::Token("abc")
        );
        assert_eq!(
            presented(&headers(&[b"bearer   abc"])),
            Presented::Token("abc")
        );
        for bad in [
            &b"Bearer"[..],
            b"Bearer ",
            b"Basic abc",
            b"Bearer a b",
            b"Bearer \xc3\xbc",
            b"abc",
        ] {
            assert_eq!(presented(&headers(&[bad])), Presented::Malformed, "{bad:?}");
        }
        assert_eq!(
            presented(&headers(&[b"Bearer abc", b"Bearer abc"])),
            Presented::Malformed
        );
        let huge = format!(
            "Bearer {}",
            "a".repeat(lock_api::limits::TOKEN_MAX_BYTES + 1)
        );
        assert_eq!(
            presented(&headers(&[huge.as_bytes()])),
            Presented::Malformed
        );
    }

    #[test]
    fn hashes_are_sha256_in_lowercase_hex() {
        assert_eq!(
            to_hex(&hash("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn find_names_the_matching_entry() {
        let known = [hash("a"), hash("b"), hash("c")];
        assert_eq!(find(&hash("b"), &known), Some(1));
        assert_eq!(find(&hash("c"), &known), Some(2));
        assert_eq!(find(&hash("a"), &known), Some(0));
        assert_eq!(find(&hash("d"), &known), None);
        assert_eq!(find(&hash("a"), &[]), None);
    }
}
