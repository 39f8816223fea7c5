import Foundation
import Glibc
@testable import rangefs
@testable import RangeFSFetch
import XCTest
@testable import RangeFSObjectStore

/// Issue 38: where `s3://` sources are reached and with what key: options, then the environment, then the AWS
/// profile files; no option takes a secret.
final class ObjectStoreSettingsTests: XCTestCase {
    var home = ""

    override func setUpWithError() throws {
        home = NSTemporaryDirectory() + "rangefs-aws-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: home + "/.aws", withIntermediateDirectories: true)
        try """
        # comment
        [default]
        aws_access_key_id = DEFAULTID
        aws_secret_access_key = default/secret
        ; another comment
        [work]
        aws_access_key_id=WORKID
        aws_secret_access_key=work+secret
        aws_session_token = TOKEN==
        """.write(toFile: home + "/.aws/credentials", atomically: true, encoding: .utf8)
        try """
        [default]
        region = eu-central-1
        [profile work]
        region = ap-south-1
        endpoint_url = http://127.0.0.1:9000
        """.write(toFile: home + "/.aws/config", atomically: true, encoding: .utf8)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: home)
    }

    func resolve(_ options: ObjectStoreOptions, _ environment: [String: String] = [:]) throws -> ObjectStoreSettings {
        try ObjectStoreSettings.resolve(options, environment: environment, home: home)
    }

    func testTheEnvironmentsKeyComesFirstThenTheProfile() throws {
        let fromProfile = try resolve(ObjectStoreOptions())
        XCTAssertEqual(fromProfile.key, .init(id: "DEFAULTID", secret: "default/secret", token: nil))
        XCTAssertEqual(fromProfile.region, "eu-central-1")
        XCTAssertNil(fromProfile.endpoint)
        XCTAssertEqual(fromProfile.keySource, ObjectStoreKeySource(profile: "default", credentialsFile: home + "/.aws/credentials",
                                                                   configFile: home + "/.aws/config"),
                       "a key from a profile is read again from there when the file changes")

        let environment = ["AWS_ACCESS_KEY_ID": "ENVID", "AWS_SECRET_ACCESS_KEY": "env-secret",
                           "AWS_SESSION_TOKEN": "envtoken", "AWS_REGION": "us-west-2",
                           "AWS_ENDPOINT_URL": "http://127.0.0.1:1"]
        let fromEnvironment = try resolve(ObjectStoreOptions(), environment)
        XCTAssertEqual(fromEnvironment.key, .init(id: "ENVID", secret: "env-secret", token: "envtoken"))
        XCTAssertEqual(fromEnvironment.region, "us-west-2")
        XCTAssertEqual(fromEnvironment.endpoint, "http://127.0.0.1:1")
        XCTAssertNil(fromEnvironment.keySource, "the environment of a running mount cannot be read again")
        XCTAssertEqual(try resolve(ObjectStoreOptions(), environment.merging(["AWS_ENDPOINT_URL_S3": "http://s3:2"]) { $1 })
            .endpoint, "http://s3:2", "the S3 endpoint wins over the general one")

        // AWS_PROFILE picks the profile when the environment holds no key; --s3-profile wins over the environment.
        let byVariable = try resolve(ObjectStoreOptions(), ["AWS_PROFILE": "work"])
        XCTAssertEqual(byVariable.key, .init(id: "WORKID", secret: "work+secret", token: "TOKEN=="))
        XCTAssertEqual(byVariable.region, "ap-south-1")
        XCTAssertEqual(byVariable.endpoint, "http://127.0.0.1:9000")
        XCTAssertEqual(try resolve(ObjectStoreOptions(profile: "work"), environment).key?.id, "WORKID")

        let options = ObjectStoreOptions(endpoint: "https://minio:9000", region: "r9", pathStyle: true)
        let given = try resolve(options, environment)
        XCTAssertEqual(given.endpoint, "https://minio:9000")
        XCTAssertEqual(given.region, "r9")
        XCTAssertEqual(given.pathStyle, true)
    }

    func testNoSignSendsNoKeyAndAMissingProfileOrABadEndpointIsOneLine() throws {
        let anonymous = try resolve(ObjectStoreOptions(noSign: true), ["AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "B"])
        XCTAssertNil(anonymous.key)
        XCTAssertTrue(anonymous.anonymous)
        XCTAssertNil(try resolve(ObjectStoreOptions(), ["AWS_PROFILE": "none", "HOME": home]).key,
                     "no key anywhere: anonymous requests")

        XCTAssertThrowsError(try resolve(ObjectStoreOptions(profile: "nope"))) { error in
            let message = (error as? MountRunner.Failure)?.message ?? ""
            XCTAssertTrue(message.hasPrefix("--s3-profile nope: no such profile in \(home)/.aws/credentials"), message)
            XCTAssertFalse(message.contains("\n"))
        }
        XCTAssertThrowsError(try resolve(ObjectStoreOptions(endpoint: "minio:9000"))) { error in
            let message = (error as? MountRunner.Failure)?.message ?? ""
            XCTAssertTrue(message.contains("'minio:9000' is not an http(s) URL"), message)
        }
        for (endpoint, problem) in [("https://gw/s3", "has a path"), ("http://u:pw@h:9000", "holds a login"),
                                    ("https://", "names no host")] {
            XCTAssertThrowsError(try resolve(ObjectStoreOptions(endpoint: endpoint))) { error in
                let message = (error as? MountRunner.Failure)?.message ?? ""
                XCTAssertTrue(message.contains(problem) && !message.contains(":pw@"), message)
            }
        }
        XCTAssertEqual(try resolve(ObjectStoreOptions(endpoint: "http://h:9000/")).endpoint, "http://h:9000/")
    }

    /// gs:// is signed only with the key of the profile named by `--gs-profile` (Google's HMAC key); an AWS key of
    /// the environment or the default profile never is, and a profile that is missing or holds no key is one line.
    func testGSIsSignedOnlyWithTheProfileNamedForIt() throws {
        let environment = ["AWS_ACCESS_KEY_ID": "ENVID", "AWS_SECRET_ACCESS_KEY": "env-secret"]
        XCTAssertNil(try resolve(ObjectStoreOptions(), environment).googleKey, "no AWS key goes to Google")
        let named = try resolve(ObjectStoreOptions(googleProfile: "work"), environment)
        XCTAssertEqual(named.googleKey, .init(id: "WORKID", secret: "work+secret", token: "TOKEN=="))
        XCTAssertEqual(named.googleKeySource?.profile, "work")
        XCTAssertEqual(named.key?.id, "ENVID", "s3:// keeps its own key")
        XCTAssertThrowsError(try resolve(ObjectStoreOptions(googleProfile: "nope"))) { error in
            let message = (error as? MountRunner.Failure)?.message ?? ""
            XCTAssertTrue(message.hasPrefix("--gs-profile nope: no such profile in \(home)/.aws/credentials"), message)
            XCTAssertFalse(message.contains("\n"))
        }
        try "[keyless]\nregion = auto\n".write(toFile: home + "/.aws/credentials-keyless", atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try resolve(ObjectStoreOptions(googleProfile: "keyless"),
                                         ["AWS_SHARED_CREDENTIALS_FILE": home + "/.aws/credentials-keyless"])) { error in
            let message = (error as? MountRunner.Failure)?.message ?? ""
            XCTAssertTrue(message.contains("holds no aws_access_key_id"), message)
        }
    }

    func testAKeyIsNeverPrinted() throws {
        let settings = try resolve(ObjectStoreOptions(profile: "work"))
        for text in [String(describing: settings), String(reflecting: settings), "\(settings)"] {
            XCTAssertFalse(text.contains("work+secret") || text.contains("TOKEN=="), text)
        }
    }

    func testTheOptionsParseFromArgvAndFromAnOptionList() throws {
        let argv = try RangefsCommand.parseCommandLine(["mount", "/mnt", "s3://bkt/data/", "--s3-endpoint",
                                                        "http://127.0.0.1:9000", "--s3-region", "r1",
                                                        "--s3-path-style", "--s3-profile", "work", "--s3-no-sign",
                                                        "--gs-profile", "google"])
        let mount = try XCTUnwrap(argv as? MountCommand)
        XCTAssertEqual(MountConfiguration(mount.options, environment: ["HOME": home]).objectStore,
                       ObjectStoreOptions(endpoint: "http://127.0.0.1:9000", region: "r1", pathStyle: true,
                                          profile: "work", noSign: true, googleProfile: "google"))
        let list = try MountOptionList.expand(["-o", "s3_endpoint=http://h:1,s3_region=r2,s3_path_style,s3_no_sign,"
                                                   + "gs_profile=google"])
        XCTAssertEqual(list, ["--s3-endpoint=http://h:1", "--s3-region=r2", "--s3-path-style", "--s3-no-sign",
                              "--gs-profile=google"])
    }

    func testAWSFilesAreReadAsTheAWSToolsReadThem() {
        let sections = AWSFile.parse("[a]\n k = v = w \n[ profile b ]\nK2=x\n#x=y\n")
        XCTAssertEqual(sections["a"], ["k": "v = w"])
        XCTAssertEqual(sections["profile b"], ["k2": "x"])
        XCTAssertNil(AWSFile.section("a", in: home + "/missing", configStyle: false))
    }
}
