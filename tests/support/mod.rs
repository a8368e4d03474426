//! Helpers shared by the hermetic tests.

#![allow(dead_code)]

pub mod faulty_store;
