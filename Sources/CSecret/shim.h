/*
 * C side of the SecretStore module: the libsecret schema of authbroker and
 * non-variadic wrappers around libsecret's varargs calls (Swift cannot call
 * C varargs functions).
 *
 * Every wrapper is a blocking libsecret `_sync` call: call them off any event
 * loop (SecretServiceStore runs them on its own serial queue) and pass a
 * GCancellable so that a call that hangs on D-Bus can be abandoned.
 */
#ifndef AUTHBROKER_CSECRET_SHIM_H
#define AUTHBROKER_CSECRET_SHIM_H

#include <libsecret/secret.h>

/* The schema of one stored credential: "org.authbroker.Credential" with four
 * string attributes. libsecret adds "xdg:schema" = the schema name to every
 * item it stores and to every search (SECRET_SCHEMA_NONE, so the name is
 * matched), so searches only ever see our own items. */
static inline const SecretSchema *authbroker_credential_schema(void)
{
    static const SecretSchema schema = {
        .name = "org.authbroker.Credential",
        .flags = SECRET_SCHEMA_NONE,
        .attributes = {
            { "provider", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "issuer", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "client_id", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "subject", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { NULL, 0 },
        },
    };
    return &schema;
}

/* The four attributes of one credential as the table libsecret's secret_service_*
 * calls take (the strings belong to the caller; free the table with
 * g_hash_table_unref). libsecret adds "xdg:schema" itself. */
static inline GHashTable *authbroker_credential_attributes(const gchar *provider,
                                                           const gchar *issuer,
                                                           const gchar *client_id,
                                                           const gchar *subject)
{
    GHashTable *attributes = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(attributes, (gpointer)"provider", (gpointer)provider);
    g_hash_table_insert(attributes, (gpointer)"issuer", (gpointer)issuer);
    g_hash_table_insert(attributes, (gpointer)"client_id", (gpointer)client_id);
    g_hash_table_insert(attributes, (gpointer)"subject", (gpointer)subject);
    return attributes;
}

/* --- The store's own bus connection ------------------------------------------------
 *
 * libsecret's default SecretService (secret_service_get_sync, and every
 * secret_password_* call) sits on GIO's shared session connection (g_bus_get_sync),
 * which GIO keeps handing out after the bus closed it: after a restart of the session
 * bus nothing would ever reach the Secret Service again. So the store opens a
 * connection of its own to the session bus address and builds its SecretService
 * proxy on it; when that connection is closed, both are made again. */

/* A new private connection to the session bus: the address GIO would use
 * (DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus), authenticated and
 * registered (Hello) as a message bus client. Not shared and not exit-on-close.
 * NULL with *error set when there is no address or nothing listens there. */
static inline GDBusConnection *authbroker_bus_open(GCancellable *cancellable, GError **error)
{
    gchar *address = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, cancellable, error);
    if (address == NULL)
        return NULL;
    GDBusConnection *connection = g_dbus_connection_new_for_address_sync(
        address,
        G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
        NULL, cancellable, error);
    g_free(address);
    if (connection != NULL)
        g_dbus_connection_set_exit_on_close(connection, FALSE);
    return connection;
}

/* Whether the bus closed this connection (set by GDBus's worker thread as soon as it
 * sees the socket close, without any main context running). */
static inline gboolean authbroker_bus_is_closed(GDBusConnection *connection)
{
    return connection == NULL || g_dbus_connection_is_closed(connection);
}

/* The start of GDBusProxy's private data, unchanged since GLib 2.26:
 * { GBusType bus_type; GDBusProxyFlags flags; GDBusConnection *connection; ... }. */
typedef struct {
    GBusType bus_type;
    GDBusProxyFlags flags;
    GDBusConnection *connection;
} AuthbrokerProxyPrivateHead;

/* --- Prompts ------------------------------------------------------------------------
 *
 * A Secret Service answers some calls (CreateItem, Unlock, Delete) with a prompt object
 * instead of a result; libsecret then calls Prompt() on it and waits for its Completed
 * signal, which comes when the user answered the service's own dialog (KeePassXC's
 * "Access Request", its database unlock dialog, gnome-keyring's unlock prompt), or
 * never on a headless service. libsecret's sync calls run every prompt through the
 * SecretService class's prompt_async/prompt_finish, so the store's proxy is a subclass
 * that reports each prompt's start (with its object path) and end to `on_prompt`,
 * on the thread that runs the libsecret call. */
/* `locked`: whether the default collection was locked when the prompt began (1), not
 * (0), or unknown (-1); only meaningful with `started`. */
typedef void (*authbroker_prompt_fn)(void *user, gboolean started, const gchar *path, gint locked);

typedef struct {
    SecretService parent;
    authbroker_prompt_fn on_prompt;
    void *user;
} AuthbrokerService;

typedef struct {
    SecretServiceClass parent_class;
} AuthbrokerServiceClass;

/* Whether the service's default collection is locked: 1 yes, 0 no, -1 unknown (no
 * alias, no answer within timeout_ms). Two round trips: ReadAlias, then its Locked. */
static inline gint authbroker_collection_locked(GDBusConnection *connection, const gchar *bus_name, gint timeout_ms)
{
    GVariant *alias = g_dbus_connection_call_sync(connection, bus_name, "/org/freedesktop/secrets",
                                                  "org.freedesktop.Secret.Service", "ReadAlias",
                                                  g_variant_new("(s)", SECRET_COLLECTION_DEFAULT), G_VARIANT_TYPE("(o)"),
                                                  G_DBUS_CALL_FLAGS_NONE, timeout_ms, NULL, NULL);
    if (alias == NULL)
        return -1;
    gchar *path = NULL;
    g_variant_get(alias, "(o)", &path);
    g_variant_unref(alias);
    if (path == NULL || g_str_equal(path, "/")) {
        g_free(path);
        return -1;
    }
    GVariant *reply = g_dbus_connection_call_sync(connection, bus_name, path, "org.freedesktop.DBus.Properties", "Get",
                                                  g_variant_new("(ss)", "org.freedesktop.Secret.Collection", "Locked"),
                                                  G_VARIANT_TYPE("(v)"), G_DBUS_CALL_FLAGS_NONE, timeout_ms, NULL, NULL);
    g_free(path);
    if (reply == NULL)
        return -1;
    GVariant *value = NULL;
    g_variant_get(reply, "(v)", &value);
    gint locked = g_variant_is_of_type(value, G_VARIANT_TYPE_BOOLEAN) ? (g_variant_get_boolean(value) ? 1 : 0) : -1;
    g_variant_unref(value);
    g_variant_unref(reply);
    return locked;
}

static inline gint authbroker_default_locked(SecretService *service, gint timeout_ms)
{
    return authbroker_collection_locked(g_dbus_proxy_get_connection(G_DBUS_PROXY(service)),
                                        g_dbus_proxy_get_name(G_DBUS_PROXY(service)), timeout_ms);
}

/* The same on a connection of its own, for a thread other than the store's while a call
 * of the store does not come back: KeePassXC answers SearchItems in a locked database
 * only once the user unlocked it (its "unlock before search"), without a prompt object,
 * but answers other calls meanwhile. Each D-Bus call waits at most timeout_ms. */
static inline gint authbroker_probe_default_locked(gint timeout_ms)
{
    GError *error = NULL;
    GDBusConnection *connection = authbroker_bus_open(NULL, &error);
    if (connection == NULL) {
        g_clear_error(&error);
        return -1;
    }
    const gchar *bus_name = g_getenv("SECRET_SERVICE_BUS_NAME");
    if (bus_name == NULL || bus_name[0] == '\0')
        bus_name = "org.freedesktop.secrets";
    gint locked = authbroker_collection_locked(connection, bus_name, timeout_ms);
    g_dbus_connection_close_sync(connection, NULL, NULL);
    g_object_unref(connection);
    return locked;
}

/* The parent's (SecretService's) prompt functions, saved by class_init. */
typedef struct {
    void (*prompt_async)(SecretService *, SecretPrompt *, const GVariantType *, GCancellable *,
                         GAsyncReadyCallback, gpointer);
    GVariant *(*prompt_finish)(SecretService *, GAsyncResult *, GError **);
    GVariant *(*prompt_sync)(SecretService *, SecretPrompt *, GCancellable *, const GVariantType *, GError **);
} AuthbrokerPromptParent;

static inline AuthbrokerPromptParent *authbroker_prompt_parent(void)
{
    static AuthbrokerPromptParent parent;
    return &parent;
}

static inline void authbroker_service_prompt_async(SecretService *self, SecretPrompt *prompt,
                                                   const GVariantType *return_type, GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer data)
{
    AuthbrokerService *service = (AuthbrokerService *)self;
    if (service->on_prompt != NULL)
        service->on_prompt(service->user, TRUE, g_dbus_proxy_get_object_path(G_DBUS_PROXY(prompt)),
                           authbroker_default_locked(self, 1000));
    authbroker_prompt_parent()->prompt_async(self, prompt, return_type, cancellable, callback, data);
}

static inline GVariant *authbroker_service_prompt_finish(SecretService *self, GAsyncResult *result, GError **error)
{
    GVariant *answer = authbroker_prompt_parent()->prompt_finish(self, result, error);
    AuthbrokerService *service = (AuthbrokerService *)self;
    if (service->on_prompt != NULL)
        service->on_prompt(service->user, FALSE, NULL, -1);
    return answer;
}

static inline GVariant *authbroker_service_prompt_sync(SecretService *self, SecretPrompt *prompt,
                                                       GCancellable *cancellable, const GVariantType *return_type,
                                                       GError **error)
{
    AuthbrokerService *service = (AuthbrokerService *)self;
    if (service->on_prompt != NULL)
        service->on_prompt(service->user, TRUE, g_dbus_proxy_get_object_path(G_DBUS_PROXY(prompt)),
                           authbroker_default_locked(self, 1000));
    GVariant *answer = authbroker_prompt_parent()->prompt_sync(self, prompt, cancellable, return_type, error);
    if (service->on_prompt != NULL)
        service->on_prompt(service->user, FALSE, NULL, -1);
    return answer;
}

static inline void authbroker_service_class_init(gpointer klass, gpointer data)
{
    (void)data;
    SecretServiceClass *service_class = klass;
    AuthbrokerPromptParent *parent = authbroker_prompt_parent();
    parent->prompt_async = service_class->prompt_async;
    parent->prompt_finish = service_class->prompt_finish;
    parent->prompt_sync = service_class->prompt_sync;
    service_class->prompt_async = authbroker_service_prompt_async;
    service_class->prompt_finish = authbroker_service_prompt_finish;
    service_class->prompt_sync = authbroker_service_prompt_sync;
}

/* The subclass's GType, registered once (called on the store's queue only). */
static inline GType authbroker_service_get_type(void)
{
    GType type = g_type_from_name("AuthbrokerSecretService");
    if (type != 0)
        return type;
    return g_type_register_static_simple(SECRET_TYPE_SERVICE, "AuthbrokerSecretService",
                                         sizeof(AuthbrokerServiceClass), authbroker_service_class_init,
                                         sizeof(AuthbrokerService), NULL, 0);
}

/* The name of the process that owns `bus_name` on `connection` (/proc/PID/comm, as
 * org.freedesktop.DBus.GetConnectionUnixProcessID gives its pid), or NULL; free it with
 * g_free. Blocks for at most timeout_ms. */
static inline gchar *authbroker_bus_owner_process(GDBusConnection *connection, const gchar *bus_name, gint timeout_ms)
{
    GVariant *reply = g_dbus_connection_call_sync(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                  "org.freedesktop.DBus", "GetConnectionUnixProcessID",
                                                  g_variant_new("(s)", bus_name), G_VARIANT_TYPE("(u)"),
                                                  G_DBUS_CALL_FLAGS_NONE, timeout_ms, NULL, NULL);
    if (reply == NULL)
        return NULL;
    guint32 pid = 0;
    g_variant_get(reply, "(u)", &pid);
    g_variant_unref(reply);
    gchar *path = g_strdup_printf("/proc/%u/comm", pid);
    gchar *comm = NULL;
    if (!g_file_get_contents(path, &comm, NULL, NULL))
        comm = NULL;
    g_free(path);
    if (comm != NULL)
        g_strstrip(comm);
    return comm;
}

/* The bus name the store's proxy talks to. */
static inline const gchar *authbroker_service_bus_name(SecretService *service)
{
    return g_dbus_proxy_get_name(G_DBUS_PROXY(service));
}

/* The connection the store's proxy uses. */
static inline GDBusConnection *authbroker_service_connection(SecretService *service)
{
    return g_dbus_proxy_get_connection(G_DBUS_PROXY(service));
}

/* A SecretService proxy on `connection`, for the Secret Service's well-known name
 * (SECRET_SERVICE_BUS_NAME overrides it, as for libsecret's default proxy): what
 * secret_service_open_sync() builds, but on this connection instead of the shared
 * one. No session yet (the first call that moves a secret opens it). Its signal
 * subscriptions (the name owner) are delivered on the thread-default main context
 * at the time of the call.
 *
 * libsecret 0.20's SecretService leaves GDBusProxy's bus type at
 * G_BUS_TYPE_SESSION whatever it is constructed with (measured: "g-connection" and
 * "g-bus-type" = NONE given, the field still reads SESSION), and GDBusProxy's init
 * then asserts that no connection was given (or, without one, takes the shared
 * connection this is here to avoid). So between construction and init the bus type
 * is set to NONE, only after checking that the private data starts as GLib lays it
 * out (the connection given, the flags given); anything else is an error, never a
 * fall-back to the shared connection. */
static inline SecretService *authbroker_service_open(GDBusConnection *connection,
                                                     authbroker_prompt_fn on_prompt,
                                                     void *user,
                                                     GCancellable *cancellable,
                                                     GError **error)
{
    const gchar *bus_name = g_getenv("SECRET_SERVICE_BUS_NAME");
    if (bus_name == NULL || bus_name[0] == '\0')
        bus_name = "org.freedesktop.secrets";
    GObject *object = g_object_new(authbroker_service_get_type(),
                                   "g-flags", G_DBUS_PROXY_FLAGS_NONE,
                                   "g-name", bus_name,
                                   "g-connection", connection,
                                   "g-object-path", "/org/freedesktop/secrets",
                                   "g-interface-name", "org.freedesktop.Secret.Service",
                                   "flags", SECRET_SERVICE_NONE,
                                   NULL);
    AuthbrokerProxyPrivateHead *head = (AuthbrokerProxyPrivateHead *)G_DBUS_PROXY(object)->priv;
    if (head == NULL || head->connection != connection || head->flags != G_DBUS_PROXY_FLAGS_NONE ||
        (head->bus_type != G_BUS_TYPE_NONE && head->bus_type != G_BUS_TYPE_SESSION)) {
        g_object_unref(object);
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                            "could not build the Secret Service proxy on authbrokerd's own bus connection (unexpected GLib layout)");
        return NULL;
    }
    head->bus_type = G_BUS_TYPE_NONE;
    ((AuthbrokerService *)object)->on_prompt = on_prompt;
    ((AuthbrokerService *)object)->user = user;
    if (!g_initable_init(G_INITABLE(object), cancellable, error)) {
        g_object_unref(object);
        return NULL;
    }
    if (g_dbus_proxy_get_connection(G_DBUS_PROXY(object)) != connection) {
        g_object_unref(object);
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                            "the Secret Service proxy is not on authbrokerd's own bus connection");
        return NULL;
    }
    return SECRET_SERVICE(object);
}

/* Runs what is pending on `context` (signals for the store's proxies: name owner
 * changes, property changes, unsubscriptions) without blocking. */
static inline void authbroker_context_drain(GMainContext *context)
{
    while (g_main_context_iteration(context, FALSE)) {
    }
}

/* Gives the unlocked item with these four attributes (the first one found, in any
 * collection) this label and secret with the item's own SetSecret, without CreateItem:
 * KeePassXC 2.7.4 (Debian 12) answers CreateItem for an item that exists with its
 * "Access Request" dialog for every new client even with ConfirmAccessItem off
 * (KeePassXC issue 9255, fixed in 2.7.6), while SetSecret asks nothing then. Returns 1
 * when an item was updated, 0 when there is no unlocked one (store it with
 * authbroker_secret_store, which may prompt), -1 with *error set. */
static inline gint authbroker_secret_update(SecretService *service,
                                            const gchar *label,
                                            const gchar *provider,
                                            const gchar *issuer,
                                            const gchar *client_id,
                                            const gchar *subject,
                                            const gchar *secret,
                                            GCancellable *cancellable,
                                            GError **error)
{
    GError *local = NULL;
    GHashTable *attributes = authbroker_credential_attributes(provider, issuer, client_id, subject);
    GList *found = secret_service_search_sync(service, authbroker_credential_schema(), attributes,
                                              SECRET_SEARCH_ALL, cancellable, &local);
    g_hash_table_unref(attributes);
    SecretItem *item = NULL;
    for (GList *node = found; node != NULL && item == NULL; node = node->next) {
        if (SECRET_IS_ITEM(node->data) && !secret_item_get_locked(SECRET_ITEM(node->data)))
            item = g_object_ref(SECRET_ITEM(node->data));
    }
    g_list_free_full(found, g_object_unref);
    if (local != NULL) {
        g_propagate_error(error, local);
        return -1;
    }
    if (item == NULL)
        return 0;
    SecretValue *value = secret_value_new(secret, -1, "text/plain");
    gboolean stored = secret_item_set_secret_sync(item, value, cancellable, &local);
    secret_value_unref(value);
    if (stored) {
        gchar *current = secret_item_get_label(item);
        if (current == NULL || !g_str_equal(current, label))
            stored = secret_item_set_label_sync(item, label, cancellable, &local);
        g_free(current);
    }
    g_object_unref(item);
    if (!stored) {
        if (local == NULL)
            local = g_error_new_literal(SECRET_ERROR, SECRET_ERROR_PROTOCOL, "the item's secret was not set");
        g_propagate_error(error, local);
        return -1;
    }
    return 1;
}

/* Stores `secret` (UTF-8 text) in the default collection. An item of the
 * schema with the same four attributes in that collection is replaced. */
static inline gboolean authbroker_secret_store(SecretService *service,
                                               const gchar *label,
                                               const gchar *provider,
                                               const gchar *issuer,
                                               const gchar *client_id,
                                               const gchar *subject,
                                               const gchar *secret,
                                               GCancellable *cancellable,
                                               GError **error)
{
    GHashTable *attributes = authbroker_credential_attributes(provider, issuer, client_id, subject);
    SecretValue *value = secret_value_new(secret, -1, "text/plain");
    gboolean stored = secret_service_store_sync(service, authbroker_credential_schema(), attributes,
                                                SECRET_COLLECTION_DEFAULT, label, value,
                                                cancellable, error);
    secret_value_unref(value);
    g_hash_table_unref(attributes);
    return stored;
}

/* Removes the items with these four attributes. Returns TRUE if at least one
 * was removed; FALSE with *error == NULL if there was none, or if the only ones
 * are locked (libsecret does not unlock them and does not say so). */
static inline gboolean authbroker_secret_clear(SecretService *service,
                                               const gchar *provider,
                                               const gchar *issuer,
                                               const gchar *client_id,
                                               const gchar *subject,
                                               GCancellable *cancellable,
                                               GError **error)
{
    GHashTable *attributes = authbroker_credential_attributes(provider, issuer, client_id, subject);
    gboolean removed = secret_service_clear_sync(service, authbroker_credential_schema(), attributes,
                                                 cancellable, error);
    g_hash_table_unref(attributes);
    return removed;
}

/* Whether an item with these four attributes exists, locked or not (no prompt, no
 * secret). 1: yes, 0: no, -1: error (*error is set). secret_service_clear_sync()
 * skips locked items and then reports "nothing removed", so this tells that case
 * apart. */
static inline gint authbroker_secret_exists(SecretService *service,
                                            const gchar *provider,
                                            const gchar *issuer,
                                            const gchar *client_id,
                                            const gchar *subject,
                                            GCancellable *cancellable,
                                            GError **error)
{
    GError *local = NULL;
    GHashTable *attributes = authbroker_credential_attributes(provider, issuer, client_id, subject);
    GList *found = secret_service_search_sync(service, authbroker_credential_schema(), attributes,
                                              SECRET_SEARCH_NONE, cancellable, &local);
    g_hash_table_unref(attributes);
    gint exists = found != NULL ? 1 : 0;
    g_list_free_full(found, g_object_unref);
    if (local != NULL) {
        g_propagate_error(error, local);
        return -1;
    }
    return exists;
}

/* Every item of the schema in every collection, unlocking locked ones (this may
 * show the desktop's unlock prompt) and loading their secrets in one round trip.
 * Returns a GList of SecretRetrievable (free with authbroker_object_list_free);
 * NULL when there is none or on error (check *error). */
static inline GList *authbroker_secret_search_all(SecretService *service, GCancellable *cancellable, GError **error)
{
    GHashTable *attributes = g_hash_table_new(g_str_hash, g_str_equal);
    GList *found = secret_service_search_sync(service, authbroker_credential_schema(), attributes,
                                              SECRET_SEARCH_ALL | SECRET_SEARCH_UNLOCK | SECRET_SEARCH_LOAD_SECRETS,
                                              cancellable, error);
    g_hash_table_unref(attributes);
    return found;
}

/* State of the default collection, for authbroker_secret_check(). */
typedef enum {
    AUTHBROKER_STORE_ERROR = -1,          /* *error is set */
    AUTHBROKER_STORE_READY = 0,           /* default collection exists and is unlocked */
    AUTHBROKER_STORE_LOCKED = 1,          /* default collection exists but is locked */
    AUTHBROKER_STORE_NO_DEFAULT = 2,      /* the service has no "default" alias */
} AuthbrokerStoreState;

/* A cheap, non-interactive probe: a search that matches nothing (proves the bus
 * and the Secret Service answer; no prompt, no secrets), then a look at the
 * default collection (exists? locked?). Never shows an unlock prompt. */
static inline AuthbrokerStoreState authbroker_secret_check(SecretService *service,
                                                          GCancellable *cancellable,
                                                          GError **error)
{
    GError *local = NULL;
    GHashTable *attributes = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(attributes, (gpointer)"provider", (gpointer)"\001authbroker-check");
    GList *found = secret_service_search_sync(service, authbroker_credential_schema(), attributes,
                                              SECRET_SEARCH_NONE, cancellable, &local);
    g_hash_table_unref(attributes);
    g_list_free_full(found, g_object_unref);
    if (local != NULL) {
        g_propagate_error(error, local);
        return AUTHBROKER_STORE_ERROR;
    }

    /* Then the default collection. Not with secret_collection_for_alias_sync(): with a
     * NULL service it is broken in libsecret 0.20.5 (it never gets the default service,
     * logs a CRITICAL and returns NULL), and the SecretCollection proxy it creates would
     * leak a little on every call (GDBus queues the unsubscription of its signals on
     * libsecret's per-call main context, which is never run again). Ask the service
     * directly instead, with the Secret Service D-Bus API on the service's connection
     * (libsecret's own secret_service_read_alias_dbus_path_sync() is "unstable" API,
     * hidden without SECRET_API_SUBJECT_TO_CHANGE): ReadAlias("default"), then the
     * collection's Locked property. No proxy, two round trips. */
    GDBusProxy *proxy = G_DBUS_PROXY(service);
    GDBusConnection *connection = g_dbus_proxy_get_connection(proxy);
    const gchar *bus_name = g_dbus_proxy_get_name(proxy);
    GVariant *alias = g_dbus_connection_call_sync(connection, bus_name, "/org/freedesktop/secrets",
                                                  "org.freedesktop.Secret.Service", "ReadAlias",
                                                  g_variant_new("(s)", SECRET_COLLECTION_DEFAULT),
                                                  G_VARIANT_TYPE("(o)"),
                                                  G_DBUS_CALL_FLAGS_NONE, -1, cancellable, &local);
    if (alias == NULL) {
        if (local == NULL)
            local = g_error_new_literal(SECRET_ERROR, SECRET_ERROR_PROTOCOL, "no answer about the default collection");
        g_propagate_error(error, local);
        return AUTHBROKER_STORE_ERROR;
    }
    gchar *path = NULL;
    g_variant_get(alias, "(o)", &path);
    g_variant_unref(alias);
    if (path == NULL || g_str_equal(path, "/")) {
        /* The service answers "/" for an alias that is not set. */
        g_free(path);
        return AUTHBROKER_STORE_NO_DEFAULT;
    }
    GVariant *reply = g_dbus_connection_call_sync(connection, bus_name, path,
                                                  "org.freedesktop.DBus.Properties", "Get",
                                                  g_variant_new("(ss)", "org.freedesktop.Secret.Collection", "Locked"),
                                                  G_VARIANT_TYPE("(v)"),
                                                  G_DBUS_CALL_FLAGS_NONE, -1, cancellable, &local);
    g_free(path);
    if (reply == NULL) {
        if (local != NULL && (g_error_matches(local, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD) ||
                              g_error_matches(local, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_OBJECT))) {
            /* gnome-keyring: the alias names a collection that does not exist. */
            g_error_free(local);
            return AUTHBROKER_STORE_NO_DEFAULT;
        }
        if (local == NULL)
            local = g_error_new_literal(SECRET_ERROR, SECRET_ERROR_PROTOCOL, "no answer about the default collection");
        g_propagate_error(error, local);
        return AUTHBROKER_STORE_ERROR;
    }
    GVariant *value = NULL;
    g_variant_get(reply, "(v)", &value);
    gboolean locked = g_variant_is_of_type(value, G_VARIANT_TYPE_BOOLEAN) ? g_variant_get_boolean(value) : TRUE;
    g_variant_unref(value);
    g_variant_unref(reply);
    return locked ? AUTHBROKER_STORE_LOCKED : AUTHBROKER_STORE_READY;
}

/* The secret of a search result. Items found with SECRET_SEARCH_LOAD_SECRETS
 * carry their secret already (the D-Bus backend returns SecretItem); the generic
 * secret_retrievable_retrieve_secret_sync() would ask the service again, one
 * round trip per item, so it is only used when nothing was loaded (for example
 * a locked item: then it fails with "Cannot get secret of a locked object").
 * Returns a new reference (secret_value_unref) or NULL with *error set. */
static inline SecretValue *authbroker_retrievable_secret(SecretRetrievable *retrievable,
                                                         GCancellable *cancellable,
                                                         GError **error)
{
    if (SECRET_IS_ITEM(retrievable)) {
        SecretValue *loaded = secret_item_get_secret(SECRET_ITEM(retrievable));
        if (loaded != NULL)
            return loaded;
    }
    GError *local = NULL;
    SecretValue *value = secret_retrievable_retrieve_secret_sync(retrievable, cancellable, &local);
    if (value == NULL && local == NULL)
        local = g_error_new_literal(SECRET_ERROR, SECRET_ERROR_NO_SUCH_OBJECT, "the item has no secret");
    if (local != NULL)
        g_propagate_error(error, local);
    return value;
}

/* The value of one attribute in a table from secret_retrievable_get_attributes(),
 * or NULL. The string belongs to the table. */
static inline const gchar *authbroker_attributes_get(GHashTable *attributes, const gchar *name)
{
    return (const gchar *)g_hash_table_lookup(attributes, name);
}

/* Frees a list of GObjects (search results). NULL is fine. */
static inline void authbroker_object_list_free(GList *list)
{
    g_list_free_full(list, g_object_unref);
}

/* Whether the error says the object is locked (SECRET_ERROR_IS_LOCKED). */
static inline gboolean authbroker_error_is_locked(const GError *error)
{
    return error != NULL && g_error_matches(error, SECRET_ERROR, SECRET_ERROR_IS_LOCKED);
}

/* Whether the error says an object went away while we used it (another client
 * deleted an item between a search and reading it): SECRET_ERROR_NO_SUCH_OBJECT
 * ("No such secret item at path ..."), or GDBus's unknown object/method. */
static inline gboolean authbroker_error_is_vanished(const GError *error)
{
    return error != NULL && (g_error_matches(error, SECRET_ERROR, SECRET_ERROR_NO_SUCH_OBJECT) ||
                             g_error_matches(error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_OBJECT) ||
                             g_error_matches(error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD));
}

/* Whether the error is G_IO_ERROR_CANCELLED (our GCancellable fired). */
static inline gboolean authbroker_error_is_cancelled(const GError *error)
{
    return error != NULL && g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
}

#endif /* AUTHBROKER_CSECRET_SHIM_H */
