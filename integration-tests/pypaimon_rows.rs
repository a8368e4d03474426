//! BinaryRow and bucket ids against pypaimon.
