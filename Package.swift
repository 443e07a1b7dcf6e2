// swift-tools-version: 6.0
import PackageDescription

/// authbroker: a per-user OAuth 2.0 / OpenID Connect token broker for Linux.
/// Modules and the direction of their dependencies are described in docs/architecture.md.
let package = Package(
    name: "AuthBroker",
    products: [
        .executable(name: "authbrokerd", targets: ["authbrokerd"]),
        .executable(name: "authctl", targets: ["authctl"]),
        .library(name: "BrokerClient", targets: ["BrokerClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        .systemLibrary(name: "CSecret", pkgConfig: "libsecret-1", providers: [.apt(["libsecret-1-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // GIO's GDBus for the sign-in notification (the library libsecret links anyway).
        .systemLibrary(name: "CGio", pkgConfig: "gio-2.0", providers: [.apt(["libglib2.0-dev"])]),
        // libqrencode: only the reference QREncoderTests compare with (a shared library on Debian).
        .systemLibrary(name: "CQREncode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),

        .target(name: "CLinux"),
        // The daemon's free() and realloc(): heap memory wiped when it is given back, so that a
        // signed-out account's refresh token is not left in freed chunks (wipe_on_free.c).
        .target(name: "CWipeOnFree"),
        .target(name: "BrokerCrypto", dependencies: ["COpenSSL"]),
        // The kernel's keyrings by their system calls (add_key, keyctl): no libkeyutils.
        .target(name: "CKeyring"),
        .target(name: "SecretStore", dependencies: ["CSecret", "CKeyring"]),
        // HTTP/1.1 over TCP or TLS (OpenSSL) to the providers: no Foundation, no libcurl.
        .target(name: "HTTPClient", dependencies: ["COpenSSL"]),
        .target(name: "OAuth", dependencies: ["BrokerCrypto", "BrokerProtocol", "HTTPClient"]),
        // The configuration file's format, TOML 1.0, read without Foundation.
        .target(name: "TOML"),
        .target(name: "BrokerProtocol"),
        // QR codes of device sign-in URLs for authctl: the standard library only.
        // Optimised in debug builds too: a few hundred lines whose reference test (every version
        // and level against libqrencode) takes 23 s of the suite unoptimised.
        .target(name: "QREncoder", swiftSettings: [.unsafeFlags(["-O"], .when(configuration: .debug))]),
        .target(name: "BrokerClient", dependencies: ["BrokerProtocol"]),
        // Opening a page in the user's browser ($BROWSER, xdg-open): authctl and the daemon.
        .target(name: "BrowserLaunch"),
        .target(
            name: "BrokerCore",
            dependencies: [
                "OAuth", "HTTPClient", "SecretStore", "BrokerProtocol", "TOML", "BrokerCrypto", "CLinux",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "BrokerServer",
            dependencies: [
                "BrokerCore", "BrokerCrypto", "BrokerProtocol", "CLinux", "HTTPClient",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The sign-in notification: org.freedesktop.Notifications over the session bus.
        .target(
            name: "DesktopNotifications",
            dependencies: ["BrokerCore", "BrowserLaunch", "CGio", .product(name: "Logging", package: "swift-log")]
        ),
        .executableTarget(
            name: "authbrokerd",
            dependencies: [
                "BrokerServer", "BrokerCore", "BrokerProtocol", "SecretStore", "OAuth", "CLinux", "CWipeOnFree", "DesktopNotifications",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // Release: lld packs the position-independent executable's relative relocations
            // (DT_RELR: kilobytes instead of megabytes read at start), and only the symbols
            // the shared libraries need are exported (docs/performance.md, resident memory).
            // scripts/authbrokerd.ld puts the .bss the daemon writes side by side, so that its
            // private pages hold those caches and not the thousands it never uses
            // (`scripts/bench --daemon-layout` remakes it; every object of the package's own
            // modules follows them, so new files need no remake; "The daemon's memory").
            linkerSettings: [.unsafeFlags(
                ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic",
                 "-Xlinker", "-T", "-Xlinker", "\(Context.packageDirectory)/scripts/authbrokerd.ld"],
                .when(platforms: [.linux], configuration: .release))]
        ),
        // argc and argv kept from glibc's call of the initialisers, so that the static Swift
        // runtime's own search of /proc/self/maps is not linked into authctl (command_line.c).
        .target(name: "CCommandLine"),
        .executableTarget(
            name: "authctl",
            dependencies: [
                // TOML: shell completions read provider and resource names from config.toml.
                "BrokerClient", "BrokerProtocol", "TOML", "BrowserLaunch", "QREncoder", "CCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            // A release authctl is one static executable: no dynamic loader, no libstdc++
            // symbol lookups, so `authctl token` starts as fast as a C program does
            // (docs/performance.md). It needs nothing from glibc's NSS or dlopen.
            // -static-stdlib, also when compiling: a static executable needs the static Swift
            // libraries, and FoundationEssentials' static module is the one that links what
            // it needs (_FoundationCollections, _FoundationCShims). Without it a plain
            // `swift build -c release` fails to link authctl; --static-swift-stdlib says the same.
            // lld with scripts/authctl.order: the code and data one `authctl token` touches sit
            // side by side, so it faults in a few 64 KB blocks of the image instead of one per
            // function (131 → 77 minor page faults; `scripts/bench --order` remakes the file).
            swiftSettings: [.unsafeFlags(["-static-stdlib"], .when(platforms: [.linux], configuration: .release))],
            linkerSettings: [.unsafeFlags(
                ["-static-executable", "-static-stdlib", "-use-ld=lld",
                 "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/scripts/authctl.order",
                 "-Xlinker", "--no-warn-symbol-ordering"],
                .when(platforms: [.linux], configuration: .release))]
        ),

        // The load generator behind scripts/bench (docs/performance.md): Glibc, and CLinux for
        // the quiet rounds' short time slice (Quiet.swift).
        .executableTarget(name: "authbench", dependencies: ["CLinux"]),

        .testTarget(name: "BrokerProtocolTests", dependencies: ["BrokerProtocol"]),
        .testTarget(name: "BrokerClientTests", dependencies: ["BrokerClient", "BrokerProtocol"]),
        .testTarget(name: "TOMLTests", dependencies: ["TOML"]),
        // The fuzz targets' properties (Fuzz/Properties, which scripts/fuzz compiles into the
        // libFuzzer targets by path) replayed over the kept corpora on every `swift test`.
        .testTarget(
            name: "FuzzCorpusTests",
            dependencies: ["BrokerServer", "BrokerProtocol", "HTTPClient", "TOML"],
            path: "Fuzz",
            exclude: ["RPCFuzz", "HTTPFuzz", "TOMLFuzz", "RedirectFuzz", "corpus", "http-corpus", "toml-corpus", "redirect-corpus"],
            sources: ["Properties", "Replay"]
        ),
        .testTarget(name: "QREncoderTests", dependencies: ["QREncoder", "CQREncode"]),
        .testTarget(name: "HTTPClientTests", dependencies: ["HTTPClient"], exclude: ["support"]),
        .testTarget(name: "SecretStoreTests", dependencies: ["SecretStore"]),
        .target(name: "JWSTestSupport", dependencies: ["BrokerCrypto"], path: "Tests/JWSTestSupport"),
        .testTarget(name: "BrokerCryptoTests", dependencies: ["BrokerCrypto", "JWSTestSupport"]),
        .testTarget(name: "OAuthTests", dependencies: ["OAuth", "BrokerCrypto", "BrokerProtocol", "HTTPClient", "JWSTestSupport"]),
        .testTarget(
            name: "BrokerCoreTests",
            dependencies: [
                "BrokerCore", "BrokerProtocol", "OAuth", "SecretStore", "BrokerCrypto", "JWSTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "BrokerServerTests",
            dependencies: [
                "BrokerServer", "BrokerCore", "BrokerProtocol", "CLinux",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "AuthctlTests",
            dependencies: ["authctl", "BrokerProtocol", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
    ]
)
