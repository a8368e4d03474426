//! Paimon's row kinds (`+I`, `-U`, `+U`, `-D`): what a change does to its key. Codecs
//! decode them, merge engines fold them, data files store them in `_VALUE_KIND`
//! (docs/format.md §7.1), so they live in a module of their own.

/// Paimon's RowKind, stored in `_VALUE_KIND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowKind {
    /// `+I`
    Insert,
    /// `-U`, a retraction.
    UpdateBefore,
    /// `+U`
    UpdateAfter,
    /// `-D`, a retraction.
    Delete,
}

impl RowKind {
    pub(crate) fn to_byte(self) -> i8 {
        match self {
            RowKind::Insert => 0,
            RowKind::UpdateBefore => 1,
            RowKind::UpdateAfter => 2,
            RowKind::Delete => 3,
        }
    }

    pub(crate) fn from_byte(b: i8) -> Option<Self> {
        match b {
            0 => Some(RowKind::Insert),
            1 => Some(RowKind::UpdateBefore),
            2 => Some(RowKind::UpdateAfter),
            3 => Some(RowKind::Delete),
            _ => None,
        }
    }

    /// `+I`, `-U`, `+U`, `-D`.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "+I" => Some(RowKind::Insert),
            "-U" => Some(RowKind::UpdateBefore),
            "+U" => Some(RowKind::UpdateAfter),
            "-D" => Some(RowKind::Delete),
            _ => None,
        }
    }

    pub(crate) fn short_string(self) -> &'static str {
        match self {
            RowKind::Insert => "+I",
            RowKind::UpdateBefore => "-U",
            RowKind::UpdateAfter => "+U",
            RowKind::Delete => "-D",
        }
    }

    /// -U and -D retract a previous version.
    pub fn is_retract(self) -> bool {
        matches!(self, RowKind::UpdateBefore | RowKind::Delete)
    }
}
