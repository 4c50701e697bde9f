//! chunkrt-config: TOML -> validated, typed configuration.
//!
//! Every table denies unknown keys, every key carries its unit (`period_ms`,
//! `max_vel_rad_s`), and every error names the file, the key path and what was
//! expected, so that a user who mistypes a key is told exactly which one.

pub mod cartesian;
mod error;
mod ethercat;
pub mod force;
mod inject;
mod kind;
mod locate;
pub mod numbers;
mod operator;
mod perjoint;
pub mod reference;
mod schema;
mod validate;

pub use cartesian::{CartesianConfig, PlaneConfig};
pub use error::{ConfigError, OverrideError};
pub use ethercat::{
    entry_name, DriveConfig, EnableInputConfig, EthercatConfig, PdoConfig, PdoEntry,
};
pub use force::ForceConfig;
pub use inject::{
    InferenceDelayConfig, InjectConfig, PanicInjection, PanicThread, ProbeConfig, ProbeShape,
    MAX_INJECT_DELAY_MS, MAX_PROBE_FREQS, PROBE_LIMIT_SHARE,
};
pub use kind::FileKind;
pub use locate::{clip, line_of, MAX_MESSAGE_BYTES};
pub use operator::{check_socket_path, resolve_group, PRIVATE_SUFFIX_MAX, SOCKET_PATH_MAX};
pub use perjoint::PerJoint;
pub use schema::*;
pub use validate::min_chunk_age_ms;

use std::path::{Path, PathBuf};

impl Config {
    /// Reads, parses and validates a configuration file.
    ///
    /// Relative paths inside the file (policy manifests, ORT library) are resolved
    /// against the file's directory.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = read_text(path, "run configuration")?;
        Config::from_file_text(&text, path)
    }

    /// Parses and validates the text of the file `path` (read by the caller, with its
    /// bound) as [`Config::load`] does: relative paths resolved against the file's
    /// directory, and what the file names on this host checked too (`[operator]`'s
    /// socket path and group).
    pub fn from_file_text(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut cfg = Config::parse_str(text, path)?;
        cfg.base_dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        cfg.check_operator_host()
            .map_err(|(key, message)| ConfigError::invalid(path, text, &key, &message))?;
        Ok(cfg)
    }

    /// Parses and validates TOML text; `origin` names the source in errors.
    pub fn parse_str(text: &str, origin: &Path) -> Result<Config, ConfigError> {
        let cfg: Config = parse_toml(text, origin)?;
        cfg.validate()
            .map_err(|(path, message)| ConfigError::invalid(origin, text, &path, &message))?;
        Ok(cfg)
    }

    /// Resolves a path from the file against the file's directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }
}

impl Config {
    /// Re-checks the whole config after changes made in code (a tool's overrides):
    /// every check a file gets (`key: message` on error).
    pub fn check(&self) -> Result<(), OverrideError> {
        self.validate()
            .map_err(|(key, message)| OverrideError { key, message })
    }

    /// Re-checks `[inject]` after command-line overrides (`key: message` on error).
    pub fn check_inject(&self) -> Result<(), OverrideError> {
        numbers::check_all(self)
            .and_then(|()| self.inject.validate(self.control.period_ms))
            .and_then(|()| self.validate_probe())
            .map_err(|(key, message)| OverrideError { key, message })
    }
}

/// Reads a TOML file's text, with a bound: a regular file of at most
/// [`chunkrt_files::TOML_LIMIT_BYTES`] (a directory, FIFO or device is refused without
/// blocking), in UTF-8 (a binary file, an ONNX model say, is told as such). The error
/// names the file.
pub fn read_file(path: &Path) -> Result<String, ConfigError> {
    read_text(path, "TOML file")
}

/// [`read_file`] with what the file is read as, for messages ("run configuration").
pub fn read_text(path: &Path, what: &'static str) -> Result<String, ConfigError> {
    match chunkrt_files::read_text_bounded(path, chunkrt_files::TOML_LIMIT_BYTES, what)? {
        Ok(text) => Ok(text),
        Err(bytes) => {
            let offset = std::str::from_utf8(&bytes)
                .err()
                .map_or(0, |e| e.valid_up_to());
            // An ONNX model is a protobuf ModelProto: field 1 (ir_version, a varint)
            // comes first, tag byte 0x08.
            let onnx =
                path.extension().is_some_and(|e| e == "onnx") || bytes.first() == Some(&0x08);
            Err(ConfigError::NotText {
                file: path.to_path_buf(),
                offset,
                onnx,
            })
        }
    }
}

/// Deserializes TOML text into any of chunkrt's file schemas (runtime config,
/// budget, ...), with errors that name the file (`origin`), the line and the key
/// path. Range checks are the caller's ([`ConfigError::invalid`] gives them the
/// line). A lone carriage return is refused with its line.
pub fn parse_toml<T: serde::de::DeserializeOwned>(
    text: &str,
    origin: &Path,
) -> Result<T, ConfigError> {
    if let Some(offset) = locate::lone_cr(text) {
        return Err(ConfigError::lone_cr(origin, text, offset));
    }
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| ConfigError::from_toml(origin, text, e))
}
