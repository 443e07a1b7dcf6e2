/// String interpolation, `print`, `dump` and assertion messages show a credential
/// without its secret, so that logging one by mistake does not leak a refresh token.
extension StoredCredential: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The credential's attributes and label; the secret is shown as `<redacted>`.
    public var description: String {
        "StoredCredential(provider: \(provider), issuer: \(issuer), clientID: \(clientID), subject: \(subject), label: \(label), secret: <redacted>)"
    }

    /// Same as `description`.
    public var debugDescription: String { description }

    /// A mirror without the secret (used by `dump` and debuggers).
    public var customMirror: Mirror {
        Mirror(self, children: [
            "provider": provider,
            "issuer": issuer,
            "clientID": clientID,
            "subject": subject,
            "label": label,
            "secret": "<redacted>",
        ])
    }
}
