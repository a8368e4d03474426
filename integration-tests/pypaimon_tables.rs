//! Tables written by lakejoin read by pypaimon and the other way round.
