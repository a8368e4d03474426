//! Decoding input records into table rows and encoding rows for output.

pub mod json;
