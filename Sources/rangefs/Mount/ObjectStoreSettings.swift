// Where `s3://` and `gs://` sources are reached, and with what key: the options first, then the environment the
// AWS tools read, then the profile in ~/.aws/credentials and ~/.aws/config. No option takes a secret: a key comes
// from the environment or a file, so it never shows in `ps`.

import FoundationEssentials
import Glibc
import RangeFSFetch
import RangeFSPlatform
import RangeFSSystem
import RangeFSObjectStore

/// The object-store options of a mount, as given (`--s3-endpoint`, `--s3-region`, `--s3-path-style`,
/// `--s3-profile`, `--s3-no-sign`).
struct ObjectStoreOptions: Equatable {
    var endpoint: String?
    var region: String?
    var pathStyle = false
    var profile: String?
    var noSign = false
    /// `--gs-profile`: the profile whose key (Google's HMAC key) signs gs:// requests.
    var googleProfile: String?
}

/// What the options, the environment and the AWS files say together.
struct ObjectStoreSettings: Equatable {
    var endpoint: String?
    var region: String?
    var pathStyle: Bool?
    var key: ObjectStoreKeyLines?
    /// The profile `key` was read from, to read it again when the files change; nil for a key from the environment.
    var keySource: ObjectStoreKeySource?
    /// The key of gs:// sources (`--gs-profile`), and the profile it was read from; nil: anonymous.
    var googleKey: ObjectStoreKeyLines?
    var googleKeySource: ObjectStoreKeySource?
    var anonymous: Bool

    /// An access key as read: id, secret and session token. Never printed (`description` hides the secret).
    struct ObjectStoreKeyLines: Equatable, CustomStringConvertible {
        var id: String
        var secret: String
        var token: String?
        var description: String { "access key \(id)" }
    }

    /// Resolves `options` against `environment` and the AWS files under `home` (or where `AWS_SHARED_CREDENTIALS_FILE`
    /// and `AWS_CONFIG_FILE` point). A profile named with `--s3-profile` must exist; `AWS_PROFILE` or `default` may not.
    static func resolve(_ options: ObjectStoreOptions, environment: [String: String],
                        home: String) throws(MountRunner.Failure) -> ObjectStoreSettings {
        let profile = options.profile ?? environment["AWS_PROFILE"] ?? "default"
        let credentialsFile = environment["AWS_SHARED_CREDENTIALS_FILE"] ?? home + "/.aws/credentials"
        let configFile = environment["AWS_CONFIG_FILE"] ?? home + "/.aws/config"
        let source = ObjectStoreKeySource(profile: profile, credentialsFile: credentialsFile, configFile: configFile)
        let profileValues = source.values
        if let named = options.profile, profileValues == nil {
            throw MountRunner.Failure("--s3-profile \(named): no such profile in \(credentialsFile) or \(configFile); "
                                      + "name a profile those files hold, or give the key in AWS_ACCESS_KEY_ID and "
                                      + "AWS_SECRET_ACCESS_KEY")
        }
        let keyOfProfile = profileValues.flatMap(keyLines)
        let keyOfEnvironment = keyLines(["aws_access_key_id": environment["AWS_ACCESS_KEY_ID"],
                                         "aws_secret_access_key": environment["AWS_SECRET_ACCESS_KEY"],
                                         "aws_session_token": environment["AWS_SESSION_TOKEN"]].compactMapValues { $0 })
        // A profile named on the command line wins over the environment, as with the AWS tools' --profile.
        let key = options.noSign ? nil
            : options.profile != nil ? keyOfProfile ?? keyOfEnvironment : keyOfEnvironment ?? keyOfProfile
        let keySource = key != nil && key == keyOfProfile && key != keyOfEnvironment ? source : nil
        let region = options.region ?? environment["AWS_REGION"] ?? environment["AWS_DEFAULT_REGION"]
            ?? profileValues?["region"]
        let endpoint = options.endpoint ?? environment["AWS_ENDPOINT_URL_S3"] ?? environment["AWS_ENDPOINT_URL"]
            ?? profileValues?["endpoint_url"]
        if let endpoint, let problem = problem(withEndpoint: endpoint) {
            throw MountRunner.Failure("the object-store endpoint '\(Redaction.redact(endpoint))' \(problem); give it as "
                                      + "--s3-endpoint https://HOST[:PORT] (or AWS_ENDPOINT_URL_S3)")
        }
        var googleKey: ObjectStoreKeyLines?
        var googleKeySource: ObjectStoreKeySource?
        if let named = options.googleProfile {
            let source = ObjectStoreKeySource(profile: named, credentialsFile: credentialsFile, configFile: configFile)
            guard let values = source.values else {
                throw MountRunner.Failure("--gs-profile \(named): no such profile in \(credentialsFile) or \(configFile); "
                                          + "put the HMAC key Google Cloud Storage made for you there as "
                                          + "aws_access_key_id and aws_secret_access_key under [\(named)]")
            }
            guard let lines = keyLines(values) else {
                throw MountRunner.Failure("--gs-profile \(named): the profile holds no aws_access_key_id and "
                                          + "aws_secret_access_key; put the HMAC key's access id and secret there")
            }
            googleKey = lines
            googleKeySource = source
        }
        return ObjectStoreSettings(endpoint: endpoint, region: region, pathStyle: options.pathStyle ? true : nil,
                                   key: key, keySource: keySource, googleKey: googleKey,
                                   googleKeySource: googleKeySource, anonymous: options.noSign)
    }

    /// The key that `values` (a profile's, or the environment's under the same names) hold, if both the id and the
    /// secret are there and not empty.
    private static func keyLines(_ values: [String: String]) -> ObjectStoreKeyLines? {
        guard let id = values["aws_access_key_id"], let secret = values["aws_secret_access_key"], !id.isEmpty,
              !secret.isEmpty else { return nil }
        return ObjectStoreKeyLines(id: id, secret: secret, token: values["aws_session_token"])
    }

    /// What is wrong with `endpoint`: it must be `http(s)://HOST[:PORT]`. A path would be taken for the bucket, and a
    /// password would end up in every file's URL (catalog.json, status, xattrs).
    static func problem(withEndpoint endpoint: String) -> String? {
        guard endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://") else { return "is not an http(s) URL" }
        let authorityAndPath = endpoint.drop(while: { $0 != ":" }).dropFirst(3)
        let slash = authorityAndPath.firstIndex(of: "/") ?? authorityAndPath.endIndex
        if authorityAndPath[..<slash].contains("@") { return "holds a login; give the key in AWS_ACCESS_KEY_ID" }
        if authorityAndPath[..<slash].isEmpty { return "names no host" }
        let rest = authorityAndPath[slash...]
        if !(rest.isEmpty || rest == "/") { return "has a path, a query or a fragment, which an endpoint cannot have" }
        return nil
    }

    /// Makes `credentials` adopt `s3://` and `gs://` sources by these settings, and gives the origins saved with
    /// the cache their keys again (credentials.json keeps no secret). Returns one line for each origin left
    /// without its key, saying where to put it.
    func apply(to credentials: CredentialTable) -> [String] {
        credentials.setObjectStore(endpoint: endpoint, region: region, pathStyle: pathStyle,
                                   key: key.map { ($0.id, $0.secret, $0.token) }, keySource: keySource,
                                   googleKey: googleKey.map { ($0.id, $0.secret, $0.token) },
                                   googleKeySource: googleKeySource, anonymous: anonymous)
        let missing = credentials.takeKeptKeys(given: anonymous ? nil : key.map { ($0.id, $0.secret, $0.token) },
                                               givenSource: keySource)
        return missing.map { origin, key in
            "the object store \(origin) has no key: \(key) is not kept on disk and is missing now; set "
                + "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or name a profile with --s3-profile) and mount again; "
                + "until then only its cached data is served"
        }
    }
}
