// The AWS tools' profile files (~/.aws/credentials and ~/.aws/config), read where a mount takes its key from them
// and again while it runs: session keys expire, and `aws sso login`, `aws configure export-credentials` or a
// credential helper write the new one into the same file. A key read from a profile remembers where it came from
// (`ObjectStoreKeySource`, kept with it in the 0600 credentials file), so the mount signs with the new key once
// the file changes, and a request the store refused with `ExpiredToken` is tried again with it.

import FoundationEssentials
import RangeFSPlatform
import RangeFSSystem

/// The AWS tools' INI files: `[name]` sections in credentials, `[profile name]` (and `[default]`) in config, and
/// `key = value` lines; `#` and `;` start comments.
package enum AWSFile {
    /// The values of profile `name` in `path`; nil when the file or the profile is missing.
    package static func section(_ name: String, in path: String, configStyle: Bool) -> [String: String]? {
        // A file that cannot be read holds no profile: the AWS tools treat it the same.
        guard let bytes = try? FileSystemCalls.readSmallFile(path, limit: 1 << 20) else { return nil }
        return parse(String(decoding: bytes, as: UTF8.self))[configStyle && name != "default" ? "profile \(name)" : name]
    }

    /// Every section of `text`, by its name (inner spaces kept, outer trimmed).
    package static func parse(_ text: String) -> [String: [String: String]] {
        var sections: [String: [String: String]] = [:]
        var current: String?
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmed()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                let name = line.dropFirst().dropLast().trimmed()
                current = name
                sections[name, default: [:]] = sections[name] ?? [:]
                continue
            }
            guard let current, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmed().lowercased()
            sections[current]?[key] = line[line.index(after: equals)...].trimmed()
        }
        return sections
    }
}

/// Where a key was read from: a profile of the AWS tools' credentials and config files. Paths and a profile name
/// are no secret; they are kept with the key.
package struct ObjectStoreKeySource: Codable, Sendable, Equatable, Hashable {
    package var profile: String
    package var credentialsFile: String
    package var configFile: String

    package init(profile: String, credentialsFile: String, configFile: String) {
        self.profile = profile
        self.credentialsFile = credentialsFile
        self.configFile = configFile
    }

    /// The profile's values: the config file's section with the credentials file's over it; nil when neither
    /// file holds the profile.
    package var values: [String: String]? {
        let fromCredentials = AWSFile.section(profile, in: credentialsFile, configStyle: false)
        let fromConfig = AWSFile.section(profile, in: configFile, configStyle: true)
        guard fromCredentials != nil || fromConfig != nil else { return nil }
        return (fromConfig ?? [:]).merging(fromCredentials ?? [:]) { $1 }
    }

    /// The key the profile holds now, remembering this source; nil when it holds none.
    package var key: ObjectStoreKey? {
        guard let values, let id = values["aws_access_key_id"], let secret = values["aws_secret_access_key"],
              !id.isEmpty, !secret.isEmpty else { return nil }
        var key = ObjectStoreKey(accessKeyID: id, secretAccessKey: secret, sessionToken: values["aws_session_token"])
        key.source = self
        return key
    }

    /// What the two files look like now (device, inode, size and modification time of each), to tell that one was
    /// written since the key was read. A rewrite by rename (what the AWS tools do) gives a new inode; one in place,
    /// a new time or size.
    package var stamp: [Int64] {
        [credentialsFile, configFile].flatMap { FileSystemCalls.version(of: $0) ?? [-1] }
    }
}
