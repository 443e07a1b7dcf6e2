/// Where config.toml is when authbrokerd is not given `--config`: `$AUTHBROKER_CONFIG`,
/// else `$XDG_CONFIG_HOME/authbroker/config.toml`, else `~/.config/authbroker/config.toml`.
///
/// Here rather than in BrokerCore so that authctl (its shell completions) finds the same
/// file without the daemon's modules.
public enum ConfigPath {
    public static let environmentVariable = "AUTHBROKER_CONFIG"

    public static func resolve(environment get: (String) -> String?) -> String {
        if let explicit = get(environmentVariable), !explicit.isEmpty { return explicit }
        if let xdg = get("XDG_CONFIG_HOME"), !xdg.isEmpty { return xdg + "/authbroker/config.toml" }
        return (get("HOME") ?? "") + "/.config/authbroker/config.toml"
    }
}
