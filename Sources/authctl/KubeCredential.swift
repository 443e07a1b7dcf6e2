#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ArgumentParser
import BrokerClient

/// `authctl kube-credential`: a kubectl exec credential plugin.
struct KubeCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kube-credential",
        abstract: "Print a Kubernetes ExecCredential with a token, for kubectl's exec plugin.",
        discussion: """
            Prints client.authentication.k8s.io/v1 ExecCredential JSON with status.token and \
            status.expirationTimestamp (RFC 3339, UTC); kubectl keeps the token until then. If \
            kubectl asks for v1beta1 (in $KUBERNETES_EXEC_INFO), the answer uses that version. \
            In ~/.kube/config:

              users:
              - name: corp
                user:
                  exec:
                    apiVersion: client.authentication.k8s.io/v1
                    command: authctl
                    args: [kube-credential, --resource, https://k8s.example.com]
                    interactiveMode: IfAvailable

            When kubectl runs it interactively (interactiveMode IfAvailable and a \
            terminal: spec.interactive in $KUBERNETES_EXEC_INFO) and the account needs a \
            sign-in, the sign-in page is shown on stderr (and by a desktop notification) \
            and the credential follows once it is done; otherwise it fails at once, as \
            kubectl asked. Without $KUBERNETES_EXEC_INFO, --wait-for-sign-in decides.

            `authctl kube-credential --print-kubeconfig --resource URL [--server URL]` \
            prints that entry (with a cluster and context for --server) for this authctl; \
            --exec-api-version v1beta1 makes it for a kubectl older than 1.22 (Debian 12's \
            is 1.20). See docs/integrations.md.
            """
    )

    @OptionGroup var token: TokenOptions

    @OptionGroup var kubeconfig: KubeconfigOptions

    /// The versions of the exec credential API this command can answer in.
    static let apiVersions = ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]

    func run() throws {
        if kubeconfig.printKubeconfig {
            let config = Kubeconfig.build(kubeconfig, token: token)
            return Output.line(kubeconfig.json ? try Output.json(config) : config.yaml().joined(separator: "\n"))
        }
        let execInfo = getenv("KUBERNETES_EXEC_INFO").map { String(cString: $0) }
        let apiVersion = try Self.requestedVersion(execInfo)
        let wait = Self.interactive(execInfo) ?? token.waitForSignIn
        let result = try DaemonCall.printableToken(token.params(), waitForSignIn: wait)
        let credential = ExecCredential(
            apiVersion: apiVersion,
            status: .init(token: result.accessToken, expirationTimestamp: RFC3339.utc(result.expiresAt)))
        do {
            Output.line(try Output.json(credential))
        } catch {
            Output.error(error.description)
            throw ExitCode(ExitStatus.failure.rawValue)
        }
    }

    /// The apiVersion kubectl asked for, v1 when it said nothing.
    static func requestedVersion(_ execInfo: String?) throws(ExitCode) -> String {
        guard let execInfo, !execInfo.isEmpty else { return apiVersions[0] }
        struct Info: Decodable { var apiVersion: String? }
        guard let info = try? JSONDecoder().decode(Info.self, from: Data(execInfo.utf8)) else {
            Output.error("KUBERNETES_EXEC_INFO is not the JSON kubectl sends: unset it, or run this command from kubectl")
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        guard let version = info.apiVersion else { return apiVersions[0] }
        guard apiVersions.contains(version) else {
            Output.error("kubectl asks for \(Output.safe(version)), but authctl answers \(apiVersions.joined(separator: " or ")): set that apiVersion in the kubeconfig's exec section")
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        return version
    }
}

extension KubeCredential {
    /// kubectl's `spec.interactive`: whether the user is there to sign in (nil when
    /// kubectl did not say). A sign-in is waited for only then.
    static func interactive(_ execInfo: String?) -> Bool? {
        struct Info: Decodable {
            struct Spec: Decodable { var interactive: Bool? }
            var spec: Spec?
        }
        guard let execInfo, let info = try? JSONDecoder().decode(Info.self, from: Data(execInfo.utf8)) else { return nil }
        return info.spec?.interactive
    }
}

/// The `ExecCredential` object of client.authentication.k8s.io.
struct ExecCredential: Encodable {
    var apiVersion: String
    var kind = "ExecCredential"
    var status: Status

    struct Status: Encodable {
        var token: String
        var expirationTimestamp: String
    }
}

/// RFC 3339 timestamps in UTC, as Kubernetes writes them: `2024-05-01T12:00:00Z`.
enum RFC3339 {
    static func utc(_ unix: Int64) -> String {
        var seconds = time_t(unix)
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "1970-01-01T00:00:00Z" }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 32) { buffer in
            guard let base = buffer.baseAddress else { return "" }
            let n = strftime(base, buffer.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
            return String(decoding: UnsafeRawBufferPointer(start: base, count: n), as: UTF8.self)
        }
    }
}
