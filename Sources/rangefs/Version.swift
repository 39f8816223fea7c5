// The version of rangefs, written in this one place: `rangefs --version` and the User-Agent say it, and
// mount-scripts/package.sh reads it from here for the Debian package (its file name and its control file).

/// The version of this build.
let rangefsVersion = "0.1.0"
