// swift-tools-version:6.0
import PackageDescription

// The core's layers, bottom up; tests import each one whose insides they check (@testable).
let coreLayers: [Target.Dependency] = [
    "RangeFSSystem", "RangeFSObjectStore", "RangeFSCache", "RangeFSCatalog", "RangeFSFetch", "RangeFSArchives",
    "RangeFSFileSystem", "RangeFSControl",
]

let package = Package(
    name: "rangefs",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "rangefs", targets: ["rangefs"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
    ],
    targets: [
        // C shims: typed wrappers around macros, bitfields and variadic functions. Nothing else is C.
        .systemLibrary(name: "CFUSE", pkgConfig: "fuse3", providers: [.apt(["libfuse3-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // SHA-256 and SHA-512 of completed files, checked against published digests.
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // zlib's inflate and crc32, for archives' deflated members and gzip streams (Archives/).
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),

        // CRC32C with the CPU's crc32 instruction; Swift cannot reach it, and checksums must keep up with the network.
        .target(name: "CChecksum"),
        // The Linux calls and constants Swift's Glibc module hides behind _GNU_SOURCE (O_DIRECT, punch-hole,
        // sync_file_range, POSIX_SPAWN_SETSID, pipe2).
        .target(name: "CLinux"),

        // What Foundation gave and FoundationEssentials lacks (threads, a condition, printf formatting, trimming).
        // No target imports Foundation: its ICU data would be most of a static binary.
        .target(name: "RangeFSPlatform", dependencies: ["CLinux"]),
        // The core, one target per layer; each depends only on the layers below it (docs/internals.md).
        // System: the Linux calls, C shims, digests and locks every layer above stands on.
        .target(name: "RangeFSSystem", dependencies: ["CChecksum", "CCrypto", "CLinux", "CZlib"]),
        // ObjectStore: S3-compatible object stores in one place: their URLs, keys and profiles, request signing
        // (SigV4) and their listings' and errors' XML. Fetch signs and pages through it; Catalog reads kept pages.
        .target(name: "RangeFSObjectStore", dependencies: ["RangeFSSystem", "RangeFSPlatform"]),
        // Cache: the cache directory's entries, blocks, ledger and store; the BlockStore seam Fetch writes through.
        .target(
            name: "RangeFSCache",
            dependencies: ["RangeFSSystem", "RangeFSPlatform", .product(name: "Logging", package: "swift-log")]
        ),
        // Catalog: the tree of mounted files and directories, listings' parsers, the saved set.
        .target(name: "RangeFSCatalog",
                dependencies: ["RangeFSCache", "RangeFSObjectStore", "RangeFSPlatform", "RangeFSSystem"]),
        // Fetch: transfers into the cache through BlockStore, their scheduling and credentials.
        .target(
            name: "RangeFSFetch",
            dependencies: ["RangeFSCache", "RangeFSCatalog", "RangeFSObjectStore", "RangeFSPlatform", "RangeFSSystem",
                           .product(name: "Logging", package: "swift-log")]
        ),
        // Archives: zip, tar, tar.gz and ISO 9660 indexes read by range; they list as Catalog's directories.
        .target(name: "RangeFSArchives", dependencies: ["RangeFSCatalog", "RangeFSSystem"]),
        // FileSystem: the mounted file system without FUSE or sockets (RangeFS and its parts), tested on its own.
        .target(
            name: "RangeFSFileSystem",
            dependencies: ["RangeFSArchives", "RangeFSCache", "RangeFSCatalog", "RangeFSFetch", "RangeFSObjectStore",
                           "RangeFSSystem", "RangeFSPlatform", .product(name: "Logging", package: "swift-log")]
        ),
        // Control: the control socket's protocol and service, which call RangeFS's verbs.
        .target(name: "RangeFSControl", dependencies: ["RangeFSFileSystem", "RangeFSSystem", "RangeFSPlatform"]),
        // Starting helper programs (fusermount3) and rangefs's own background child; the core never does.
        .target(name: "RangeFSProcess", dependencies: ["CLinux"]),
        .target(
            name: "RangeFSHTTP",
            dependencies: ["CCurl", "RangeFSCache", "RangeFSFetch", "RangeFSPlatform", "RangeFSSystem",
                           .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "RangeFSFUSE",
            dependencies: ["CFUSE", "CLinux", "RangeFSCache", "RangeFSFileSystem", "RangeFSPlatform", "RangeFSProcess", "RangeFSSystem",
                           .product(name: "Logging", package: "swift-log")]
        ),
        .executableTarget(
            name: "rangefs",
            dependencies: [
                "CLinux", "RangeFSCache", "RangeFSCatalog", "RangeFSControl", "RangeFSFetch", "RangeFSFileSystem", "RangeFSHTTP",
                "RangeFSObjectStore",
                "RangeFSFUSE", "RangeFSPlatform", "RangeFSProcess", "RangeFSSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The tests' shared fixtures. A test target, so that `swift build -c release` leaves it out: it imports the
        // core with @testable, which only a build for testing allows.
        .testTarget(
            name: "RangeFSTestSupport",
            dependencies: coreLayers + ["RangeFSProcess"],
            path: "Tests/RangeFSTestSupport"
        ),
        // Tests share fixtures across threads the way XCTest does; Swift 5 mode keeps that free of ceremony.
        .testTarget(name: "RangeFSCoreTests", dependencies: coreLayers + ["RangeFSPlatform", "RangeFSTestSupport"],
                    swiftSettings: [.swiftLanguageMode(.v5)]),
        .testTarget(name: "RangeFSHTTPTests", dependencies: coreLayers + ["RangeFSHTTP", "RangeFSTestSupport"],
                    swiftSettings: [.swiftLanguageMode(.v5)]),
        // The FUSE adapter's argument handling, without a mount.
        .testTarget(name: "RangeFSFUSETests", dependencies: ["RangeFSFUSE"],
                    swiftSettings: [.swiftLanguageMode(.v5)]),
        .testTarget(name: "RangefsCommandTests", dependencies: coreLayers + ["rangefs", "RangeFSHTTP", "RangeFSFUSE"],
                    swiftSettings: [.swiftLanguageMode(.v5)]),
        .testTarget(name: "IntegrationTests", dependencies: coreLayers + ["rangefs", "RangeFSTestSupport"],
                    swiftSettings: [.swiftLanguageMode(.v5)]),
    ]
)
