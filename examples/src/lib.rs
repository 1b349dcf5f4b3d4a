//! The shop's job definitions, shared by the web app and the separate worker binary.
