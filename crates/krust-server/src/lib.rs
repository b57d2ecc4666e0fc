//! The krust broker core.
