//! The protobuf wire format: varints, length-delimited values and field keys.

/// Wire type of varint-encoded scalars (int32, int64, bool).
pub(super) const WIRE_VARINT: u8 = 0;
/// Wire type of length-delimited values (strings, bytes, messages, packed repeated scalars).
pub(super) const WIRE_LEN: u8 = 2;

/// A cursor over protobuf wire-format bytes. Every read is bounds-checked and reports truncation as
/// an error, so arbitrary input can never panic.
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
        self.pos += 1;
        Ok(b)
    }

    /// Reads a base-128 varint of at most 10 bytes (the most a u64 can need).
    pub(super) fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            // The 10th byte may only carry the top bit of a u64; anything more overflows.
            if i == 9 && b > 1 {
                return Err("varint overflows 64 bits".to_string());
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint longer than 10 bytes".to_string())
    }

    /// Reads the next field key, or `None` at the end of the buffer.
    pub(super) fn key(&mut self) -> Result<Option<(u32, u8)>, String> {
        if self.at_end() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = u32::try_from(key >> 3)
            .map_err(|_| format!("field number {} out of range", key >> 3))?;
        if field == 0 {
            return Err("field number 0 is invalid".to_string());
        }
        // Masked to three bits, so the conversion cannot fail.
        let wire = u8::try_from(key & 7).unwrap_or(u8::MAX);
        Ok(Some((field, wire)))
    }

    /// Reads a length prefix and returns that many bytes.
    pub(super) fn len_bytes(&mut self) -> Result<&'a [u8], String> {
        let len = self.varint()?;
        let len = usize::try_from(len).map_err(|_| format!("length {len} out of range"))?;
        let end = self.pos.checked_add(len).ok_or("length overflows")?;
        let bytes = self.buf.get(self.pos..end).ok_or_else(|| {
            format!(
                "length {len} runs past the end of the message ({} bytes left)",
                self.buf.len().saturating_sub(self.pos)
            )
        })?;
        self.pos = end;
        Ok(bytes)
    }
}

/// Reads a varint after checking the key announced one.
pub(super) fn read_varint(reader: &mut Reader<'_>, wire: u8) -> Result<u64, String> {
    expect_wire(wire, WIRE_VARINT)?;
    reader.varint()
}

/// Reads length-delimited bytes after checking the key announced them.
pub(super) fn read_len<'a>(reader: &mut Reader<'a>, wire: u8) -> Result<&'a [u8], String> {
    expect_wire(wire, WIRE_LEN)?;
    reader.len_bytes()
}

/// Reads a string field. Go strings may hold any bytes and Go's JSON encoder replaces invalid UTF-8
/// with U+FFFD, which is exactly what a lossy conversion does.
pub(super) fn read_string(reader: &mut Reader<'_>, wire: u8) -> Result<String, String> {
    Ok(String::from_utf8_lossy(read_len(reader, wire)?).into_owned())
}

fn expect_wire(actual: u8, expected: u8) -> Result<(), String> {
    if actual == expected {
        Ok(())
    } else {
        Err(format!("wire type {actual}, expected {expected}"))
    }
}

pub(super) fn unknown_field(message: &str, field: u32) -> String {
    format!("field {field} of {message} is not supported")
}

/// Go's int32 decoding keeps the low 32 bits of the varint (negatives are sign-extended on the wire).
pub(super) fn as_i32(v: u64) -> i32 {
    v as i32
}

/// int64 is the varint reinterpreted as two's complement.
pub(super) fn as_i64(v: u64) -> i64 {
    v as i64
}
