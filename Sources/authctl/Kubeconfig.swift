import ArgumentParser

/// `authctl kube-credential --print-kubeconfig`: the kubeconfig whose user runs this very
/// command as kubectl's exec credential plugin.
struct KubeconfigOptions: ParsableArguments {
    @Flag(name: .customLong("print-kubeconfig"), help: "Print a kubeconfig (YAML) whose user gets its token from `authctl kube-credential` with these options, instead of a credential.")
    var printKubeconfig = false

    @Option(name: .customLong("cluster-name"), help: ArgumentHelp("With --print-kubeconfig: the name of the user (and cluster and context); default: the provider's name, else authbroker.", valueName: "name"))
    var clusterName: String?

    @Option(help: ArgumentHelp("With --print-kubeconfig: the API server's URL; the kubeconfig then has a cluster and a current context too, not only the user.", valueName: "url"))
    var server: String?

    @Option(name: .customLong("certificate-authority"), help: ArgumentHelp("With --server: the file with the CA certificate(s) the API server's certificate is checked against; default: the system's.", valueName: "file"))
    var certificateAuthority: String?

    @Flag(help: "With --print-kubeconfig: print it as JSON instead of YAML (kubectl reads both).")
    var json = false

    @Option(name: .customLong("exec-api-version"), help: ArgumentHelp("With --print-kubeconfig: the exec plugin's client.authentication.k8s.io version, v1 (kubectl 1.22 and later; the default) or v1beta1 (older kubectl, such as Debian 12's 1.20).", valueName: "version"))
    var execAPIVersion: String?

    /// The exec credential API the kubeconfig names: `--exec-api-version`, v1 by default.
    var apiVersion: String {
        guard let execAPIVersion else { return KubeCredential.apiVersions[0] }
        return execAPIVersion.hasPrefix(Self.group) ? execAPIVersion : Self.group + execAPIVersion
    }

    private static let group = "client.authentication.k8s.io/"

    func validate() throws {
        if let execAPIVersion, !KubeCredential.apiVersions.contains(apiVersion) {
            throw ValidationError("--exec-api-version is v1 or v1beta1, not \(execAPIVersion)")
        }
        if !printKubeconfig, execAPIVersion != nil {
            throw ValidationError("--exec-api-version goes with --print-kubeconfig")
        }
        if !printKubeconfig, clusterName != nil || server != nil || json {
            throw ValidationError("--cluster-name, --server and --json go with --print-kubeconfig")
        }
        if server == nil, certificateAuthority != nil {
            throw ValidationError("--certificate-authority goes with --server")
        }
        if clusterName?.isEmpty == true || server?.isEmpty == true {
            throw ValidationError("--cluster-name and --server need a value")
        }
    }
}

/// The kubeconfig, built as an ordered tree so that YAML and JSON show the same thing.
enum Kubeconfig {
    /// kubectl tells the plugin whether the user is there (`spec.interactive`): when so, a
    /// needed sign-in is waited for (docs/sign-in.md, "Sign-in on demand"); otherwise the
    /// plugin fails at once.
    static let interactiveMode = "IfAvailable"

    /// The kubeconfig for the token `options` choose, run by `command` (authctl's path).
    static func build(_ options: KubeconfigOptions, token: TokenOptions, command: String = Executable.ownPath()) -> Node {
        let name = options.clusterName ?? token.provider ?? "authbroker"
        let user: Node = .map([
            ("name", .string(name)),
            ("user", .map([("exec", .map([
                ("apiVersion", .string(options.apiVersion)),
                ("command", .string(command)),
                ("args", .list(arguments(token).map(Node.string))),
                ("interactiveMode", .string(interactiveMode)),
                ("provideClusterInfo", .bool(false)),
            ]))])),
        ])
        var top: [(String, Node)] = [("apiVersion", .string("v1")), ("kind", .string("Config"))]
        if let server = options.server {
            var cluster: [(String, Node)] = [("server", .string(server))]
            if let file = options.certificateAuthority { cluster.append(("certificate-authority", .string(file))) }
            top += [
                ("clusters", .list([.map([("name", .string(name)), ("cluster", .map(cluster))])])),
                ("contexts", .list([.map([("name", .string(name)), ("context", .map([("cluster", .string(name)), ("user", .string(name))]))])])),
                ("current-context", .string(name)),
            ]
        }
        top.append(("users", .list([user])))
        return .map(top)
    }

    /// `kube-credential` and the token options as given on this command line.
    static func arguments(_ token: TokenOptions) -> [String] {
        var args = ["kube-credential"]
        if let resource = token.resource { args += ["--resource", resource] }
        for scope in token.scopes { args += ["--scope", scope] }
        if let provider = token.provider { args += ["--provider", provider] }
        if let account = token.account { args += ["--account", account] }
        if let minTTL = token.minTTL { args += ["--min-ttl", String(minTTL)] }
        for pair in token.extra { args += ["--param", pair] }
        return args
    }

    /// A YAML or JSON value with its keys in the order written.
    indirect enum Node: Encodable {
        case string(String)
        case bool(Bool)
        case list([Node])
        case map([(String, Node)])

        private struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .string(let s):
                var c = encoder.singleValueContainer()
                try c.encode(s)
            case .bool(let b):
                var c = encoder.singleValueContainer()
                try c.encode(b)
            case .list(let items):
                var c = encoder.unkeyedContainer()
                for item in items { try c.encode(item) }
            case .map(let pairs):
                var c = encoder.container(keyedBy: Key.self)
                for (key, value) in pairs { try c.encode(value, forKey: Key(stringValue: key)) }
            }
        }

        /// Block-style YAML, lists at their key's indentation as kubectl writes them.
        func yaml(indent: String = "") -> [String] {
            switch self {
            case .string, .bool:
                return [indent + scalar]
            case .list(let items):
                return items.flatMap { item -> [String] in
                    guard case .map = item else { return [indent + "- " + item.scalar] }
                    var lines = item.yaml(indent: indent + "  ")
                    if !lines.isEmpty { lines[0] = indent + "- " + lines[0].dropFirst(indent.count + 2) }
                    return lines
                }
            case .map(let pairs):
                return pairs.flatMap { key, value -> [String] in
                    switch value {
                    case .string, .bool: return [indent + key + ": " + value.scalar]
                    case .list(let items) where items.isEmpty: return [indent + key + ": []"]
                    case .list: return [indent + key + ":"] + value.yaml(indent: indent)
                    case .map: return [indent + key + ":"] + value.yaml(indent: indent + "  ")
                    }
                }
            }
        }

        /// A scalar: plain when YAML reads it back as that string, else double-quoted
        /// (JSON's escapes are YAML's).
        private var scalar: String {
            switch self {
            case .bool(let b): return b ? "true" : "false"
            case .string(let s):
                // Options (`--resource`) stay plain too: a dash starts a list item only before a space.
                let plain = (s.first.map { $0.isASCII && ($0.isLetter || $0 == "/") } == true || s.hasPrefix("--") && s.count > 2)
                    && s.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_./:@".unicodeScalars.contains($0)) }
                    && !["true", "false", "yes", "no", "on", "off", "null", "y", "n"].contains(s.lowercased())
                return plain ? s : Self.quoted(s)
            default: return ""
            }
        }

        private static func quoted(_ s: String) -> String {
            var out = "\""
            for scalar in s.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
    }
}
