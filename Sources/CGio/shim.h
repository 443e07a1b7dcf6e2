/*
 * C side of the DesktopNotifications module: org.freedesktop.Notifications over the
 * session bus with GIO's GDBus (linked already through libsecret).
 *
 * The notifier has its own connection to the session bus (not the shared one libsecret
 * uses) and its own thread running a GMainLoop, where the ActionInvoked signal is
 * delivered. Notify is a blocking call with a time-out: call it off any event loop.
 */
#ifndef AUTHBROKER_CGIO_SHIM_H
#define AUTHBROKER_CGIO_SHIM_H

#include <gio/gio.h>
#include <string.h>

/* Called on the notifier's thread when the user chose an action of a notification, or with
 * action NULL when a notification was closed (expired, dismissed, or taken back). `sender`
 * is the signal's; whether it is the server's is decided by the callee against
 * authbroker_notifier_server (a Notify's answer can come after its signals). */
typedef void (*authbroker_action_fn)(guint32 id, const gchar *action, const gchar *sender, void *user);

typedef struct {
    GDBusConnection *connection;
    GMainContext *context;
    GMainLoop *loop;
    authbroker_action_fn on_action;
    void *user;
    /* The unique bus name of the server that answered the last Notify: only its signals
     * are taken. Any client of the bus may send ActionInvoked, the asking program too. */
    GMutex lock;
    gchar *server;
} AuthbrokerNotifier;

#define AUTHBROKER_NOTIFICATIONS "org.freedesktop.Notifications"
#define AUTHBROKER_NOTIFICATIONS_PATH "/org/freedesktop/Notifications"

static void authbroker_notifier_signal(GDBusConnection *connection, const gchar *sender, const gchar *path,
                                       const gchar *interface, const gchar *signal, GVariant *parameters,
                                       gpointer data)
{
    (void)connection; (void)path; (void)interface;
    AuthbrokerNotifier *notifier = data;
    if (sender == NULL)
        return;
    guint32 id = 0;
    if (g_str_equal(signal, "NotificationClosed") && g_variant_is_of_type(parameters, G_VARIANT_TYPE("(uu)"))) {
        guint32 reason = 0;
        g_variant_get(parameters, "(uu)", &id, &reason);
        notifier->on_action(id, NULL, sender, notifier->user);
        return;
    }
    if (!g_str_equal(signal, "ActionInvoked") || !g_variant_is_of_type(parameters, G_VARIANT_TYPE("(us)")))
        return;
    const gchar *action = NULL;
    g_variant_get(parameters, "(u&s)", &id, &action);
    notifier->on_action(id, action, sender, notifier->user);
}

static gpointer authbroker_notifier_run(gpointer data)
{
    AuthbrokerNotifier *notifier = data;
    g_main_context_push_thread_default(notifier->context);
    g_main_loop_run(notifier->loop);
    g_main_context_pop_thread_default(notifier->context);
    return NULL;
}

/* Connects to the session bus ($DBUS_SESSION_BUS_ADDRESS) and listens for ActionInvoked.
 * Returns NULL with *error set when there is no session bus. Lives as long as the
 * process: the daemon makes one. Signals are subscribed from any sender (GDBus matches a
 * well-known sender name unreliably across versions) and taken only from the unique name
 * that answered the last Notify (`server`): another client's ActionInvoked "allow" must
 * not answer a confirm rule's question. */
static inline AuthbrokerNotifier *authbroker_notifier_new(authbroker_action_fn on_action, void *user, GError **error)
{
    gchar *address = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, NULL, error);
    if (address == NULL)
        return NULL;
    GDBusConnection *connection = g_dbus_connection_new_for_address_sync(
        address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
        NULL, NULL, error);
    g_free(address);
    if (connection == NULL)
        return NULL;
    /* A bus that goes away must not end the daemon (GDBus's default for the shared one). */
    g_dbus_connection_set_exit_on_close(connection, FALSE);
    AuthbrokerNotifier *notifier = g_new0(AuthbrokerNotifier, 1);
    notifier->connection = connection;
    notifier->context = g_main_context_new();
    notifier->loop = g_main_loop_new(notifier->context, FALSE);
    notifier->on_action = on_action;
    notifier->user = user;
    g_mutex_init(&notifier->lock);
    /* Signals are delivered on the thread-default context at subscription: the loop's. */
    g_main_context_push_thread_default(notifier->context);
    g_dbus_connection_signal_subscribe(connection, NULL, AUTHBROKER_NOTIFICATIONS, "ActionInvoked",
                                       AUTHBROKER_NOTIFICATIONS_PATH, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
                                       authbroker_notifier_signal, notifier, NULL);
    g_dbus_connection_signal_subscribe(connection, NULL, AUTHBROKER_NOTIFICATIONS, "NotificationClosed",
                                       AUTHBROKER_NOTIFICATIONS_PATH, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
                                       authbroker_notifier_signal, notifier, NULL);
    g_main_context_pop_thread_default(notifier->context);
    g_thread_unref(g_thread_new("authbroker-notify", authbroker_notifier_run, notifier));
    return notifier;
}

/* Sends one Notify call with the given icon, actions and hints. Blocks for at most
 * call_timeout_ms. Returns the notification's id, 0 with *error set when no server answered.
 * The answer's sender becomes the one whose signals are taken (`server`). */
static inline guint32 authbroker_notifier_send(AuthbrokerNotifier *notifier, const gchar *app_name, const gchar *icon,
                                               const gchar *summary, const gchar *body, GVariantBuilder *actions,
                                               GVariantBuilder *hints, gint expire_ms, gint call_timeout_ms,
                                               GError **error)
{
    GDBusMessage *call = g_dbus_message_new_method_call(AUTHBROKER_NOTIFICATIONS, AUTHBROKER_NOTIFICATIONS_PATH,
                                                        AUTHBROKER_NOTIFICATIONS, "Notify");
    g_dbus_message_set_body(call, g_variant_new("(susssasa{sv}i)", app_name, 0, icon, summary, body, actions, hints, expire_ms));
    GDBusMessage *reply = g_dbus_connection_send_message_with_reply_sync(
        notifier->connection, call, G_DBUS_SEND_MESSAGE_FLAGS_NONE, call_timeout_ms, NULL, NULL, error);
    g_object_unref(call);
    if (reply == NULL)
        return 0;
    if (g_dbus_message_to_gerror(reply, error)) {
        g_object_unref(reply);
        return 0;
    }
    GVariant *answer = g_dbus_message_get_body(reply);
    const gchar *sender = g_dbus_message_get_sender(reply);
    if (answer == NULL || !g_variant_is_of_type(answer, G_VARIANT_TYPE("(u)")) || sender == NULL) {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "the notification server's answer to Notify has no id");
        g_object_unref(reply);
        return 0;
    }
    guint32 id = 0;
    g_variant_get(answer, "(u)", &id);
    g_mutex_lock(&notifier->lock);
    g_free(notifier->server);
    notifier->server = g_strdup(sender);
    g_mutex_unlock(&notifier->lock);
    g_object_unref(reply);
    return id;
}

/* Shows a notification with one action ("default" and `action` both labelled
 * `action_label`: servers show the one or the other). Blocks for at most call_timeout_ms.
 * Returns the notification's id, 0 with *error set when no server answered. */
static inline guint32 authbroker_notifier_notify(AuthbrokerNotifier *notifier, const gchar *app_name,
                                                 const gchar *summary, const gchar *body,
                                                 const gchar *action, const gchar *action_label,
                                                 gint expire_ms, gint call_timeout_ms, GError **error)
{
    GVariantBuilder actions;
    g_variant_builder_init(&actions, G_VARIANT_TYPE("as"));
    g_variant_builder_add(&actions, "s", "default");
    g_variant_builder_add(&actions, "s", action_label);
    g_variant_builder_add(&actions, "s", action);
    g_variant_builder_add(&actions, "s", action_label);
    GVariantBuilder hints;
    g_variant_builder_init(&hints, G_VARIANT_TYPE("a{sv}"));
    g_variant_builder_add(&hints, "{sv}", "urgency", g_variant_new_byte(1));
    /* Kept after a click on servers that would drop it: the sign-in may still be going on. */
    g_variant_builder_add(&hints, "{sv}", "resident", g_variant_new_boolean(TRUE));
    return authbroker_notifier_send(notifier, app_name, "dialog-password", summary, body, &actions, &hints,
                                      expire_ms, call_timeout_ms, error);
}

/* Shows a notice: no action, normal urgency. Blocks for at most call_timeout_ms. Returns
 * the notification's id, 0 with *error set when no server answered. */
static inline guint32 authbroker_notifier_tell(AuthbrokerNotifier *notifier, const gchar *app_name,
                                               const gchar *summary, const gchar *body,
                                               gint expire_ms, gint call_timeout_ms, GError **error)
{
    GVariantBuilder actions;
    g_variant_builder_init(&actions, G_VARIANT_TYPE("as"));
    GVariantBuilder hints;
    g_variant_builder_init(&hints, G_VARIANT_TYPE("a{sv}"));
    g_variant_builder_add(&hints, "{sv}", "urgency", g_variant_new_byte(1));
    return authbroker_notifier_send(notifier, app_name, "dialog-password", summary, body, &actions, &hints,
                                      expire_ms, call_timeout_ms, error);
}

/* Shows a question with the actions "allow" and, when `lease_label` is not NULL,
 * "allow-lease" ("Allow for N minutes"), then "deny" (labelled `allow_label`,
 * `lease_label` and `deny_label`), and no default action: a click on the body answers
 * nothing. Blocks for at most call_timeout_ms. Returns the notification's id, 0 with
 * *error set when no server answered. */
static inline guint32 authbroker_notifier_ask_lease(AuthbrokerNotifier *notifier, const gchar *app_name,
                                                    const gchar *summary, const gchar *body,
                                                    const gchar *allow_label, const gchar *lease_label,
                                                    const gchar *deny_label,
                                                    gint expire_ms, gint call_timeout_ms, GError **error)
{
    GVariantBuilder actions;
    g_variant_builder_init(&actions, G_VARIANT_TYPE("as"));
    g_variant_builder_add(&actions, "s", "allow");
    g_variant_builder_add(&actions, "s", allow_label);
    if (lease_label != NULL) {
        g_variant_builder_add(&actions, "s", "allow-lease");
        g_variant_builder_add(&actions, "s", lease_label);
    }
    g_variant_builder_add(&actions, "s", "deny");
    g_variant_builder_add(&actions, "s", deny_label);
    GVariantBuilder hints;
    g_variant_builder_init(&hints, G_VARIANT_TYPE("a{sv}"));
    /* Critical: servers keep it on screen until it is answered or taken back. */
    g_variant_builder_add(&hints, "{sv}", "urgency", g_variant_new_byte(2));
    return authbroker_notifier_send(notifier, app_name, "dialog-question", summary, body, &actions, &hints,
                                      expire_ms, call_timeout_ms, error);
}

/* Shows a question with two actions, "allow" and "deny" (authbroker_notifier_ask_lease
 * without a lease). */
static inline guint32 authbroker_notifier_ask(AuthbrokerNotifier *notifier, const gchar *app_name,
                                              const gchar *summary, const gchar *body,
                                              const gchar *allow_label, const gchar *deny_label,
                                              gint expire_ms, gint call_timeout_ms, GError **error)
{
    return authbroker_notifier_ask_lease(notifier, app_name, summary, body, allow_label, NULL, deny_label,
                                         expire_ms, call_timeout_ms, error);
}

/* The XML the owner of `name` gives for `path` (org.freedesktop.DBus.Introspectable),
 * or NULL; free it with g_free. */
static inline gchar *authbroker_introspect(AuthbrokerNotifier *notifier, const gchar *name, const gchar *path,
                                           gint call_timeout_ms)
{
    GVariant *reply = g_dbus_connection_call_sync(notifier->connection, name, path,
                                                  "org.freedesktop.DBus.Introspectable", "Introspect", NULL,
                                                  G_VARIANT_TYPE("(s)"), G_DBUS_CALL_FLAGS_NONE, call_timeout_ms, NULL, NULL);
    if (reply == NULL)
        return NULL;
    gchar *xml = NULL;
    g_variant_get(reply, "(s)", &xml);
    g_variant_unref(reply);
    return xml;
}

/* Whether the XML names the interface (`<interface name="IFACE"`). */
static inline gboolean authbroker_xml_has_interface(const gchar *xml, const gchar *iface)
{
    if (xml == NULL)
        return FALSE;
    gchar *needle = g_strdup_printf("name=\"%s\"", iface);
    gboolean found = strstr(xml, needle) != NULL;
    g_free(needle);
    return found;
}

/* The notification servers that let any client of the session bus invoke a shown
 * notification's action (docs/security.md, "confirm on the desktop"), as their sources
 * publish it:
 *   mako:   interface fr.emersion.Mako at /fr/emersion/Mako on the server's own name,
 *           InvokeAction(u id, s action) (makoctl invoke -n ID allow);
 *   dunst:  interface org.dunstproject.cmd0 at /org/freedesktop/Notifications,
 *           NotificationAction(u) and ContextMenuCall (dunstctl action, dunstctl context),
 *           and ConfigReload with a dmenu command of the caller's choosing;
 *   swaync: the name org.erikreider.swaync.cc, LatestInvokeAction(u index)
 *           (swaync-client --action).
 * Returns what the server is and how it is driven (a static string), or NULL when it is
 * none of them or no server answers (Notify then says so itself). Asked before each
 * question: the server may have been replaced since the last. Blocks for at most three
 * calls of call_timeout_ms. */
static inline const gchar *authbroker_notifier_answerable_by_others(AuthbrokerNotifier *notifier, gint call_timeout_ms)
{
    static const gchar *const mako = "mako (its fr.emersion.Mako interface: makoctl invoke answers a question for you)";
    static const gchar *const dunst = "dunst (its org.dunstproject.cmd0 interface: dunstctl action and dunstctl context answer a question for you)";
    static const gchar *const swaync = "SwayNotificationCenter (its org.erikreider.swaync.cc interface: swaync-client --action answers a question for you)";
    GVariant *info = g_dbus_connection_call_sync(notifier->connection, AUTHBROKER_NOTIFICATIONS, AUTHBROKER_NOTIFICATIONS_PATH,
                                                 AUTHBROKER_NOTIFICATIONS, "GetServerInformation", NULL,
                                                 G_VARIANT_TYPE("(ssss)"), G_DBUS_CALL_FLAGS_NONE, call_timeout_ms, NULL, NULL);
    if (info != NULL) {
        const gchar *name = NULL;
        g_variant_get(info, "(&s&s&s&s)", &name, NULL, NULL, NULL);
        const gchar *found = NULL;
        if (name != NULL && g_ascii_strcasecmp(name, "mako") == 0)
            found = mako;
        else if (name != NULL && g_ascii_strcasecmp(name, "dunst") == 0)
            found = dunst;
        else if (name != NULL && (g_ascii_strcasecmp(name, "SwayNotificationCenter") == 0 || g_ascii_strcasecmp(name, "swaync") == 0))
            found = swaync;
        g_variant_unref(info);
        if (found != NULL)
            return found;
    }
    /* A server that gives another name: its published interfaces decide. */
    gchar *xml = authbroker_introspect(notifier, AUTHBROKER_NOTIFICATIONS, "/fr/emersion/Mako", call_timeout_ms);
    gboolean is_mako = authbroker_xml_has_interface(xml, "fr.emersion.Mako");
    g_free(xml);
    if (is_mako)
        return mako;
    xml = authbroker_introspect(notifier, AUTHBROKER_NOTIFICATIONS, AUTHBROKER_NOTIFICATIONS_PATH, call_timeout_ms);
    gboolean is_dunst = authbroker_xml_has_interface(xml, "org.dunstproject.cmd0");
    g_free(xml);
    if (is_dunst)
        return dunst;
    GVariant *owned = g_dbus_connection_call_sync(notifier->connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                  "org.freedesktop.DBus", "NameHasOwner", g_variant_new("(s)", "org.erikreider.swaync.cc"),
                                                  G_VARIANT_TYPE("(b)"), G_DBUS_CALL_FLAGS_NONE, call_timeout_ms, NULL, NULL);
    gboolean has = FALSE;
    if (owned != NULL) {
        g_variant_get(owned, "(b)", &has);
        g_variant_unref(owned);
    }
    return has ? swaync : NULL;
}

/* The unique bus name of the server that answered the last Notify (free with g_free), or
 * NULL before any answered. */
static inline gchar *authbroker_notifier_server(AuthbrokerNotifier *notifier)
{
    g_mutex_lock(&notifier->lock);
    gchar *server = g_strdup(notifier->server);
    g_mutex_unlock(&notifier->lock);
    return server;
}

/* Takes a notification back; no answer is waited for. */
static inline void authbroker_notifier_close(AuthbrokerNotifier *notifier, guint32 id)
{
    g_dbus_connection_call(notifier->connection, AUTHBROKER_NOTIFICATIONS, AUTHBROKER_NOTIFICATIONS_PATH,
                           AUTHBROKER_NOTIFICATIONS, "CloseNotification", g_variant_new("(u)", id), NULL,
                           G_DBUS_CALL_FLAGS_NONE, -1, NULL, NULL, NULL);
}

/* The error's message (owned by the error). */
static inline const gchar *authbroker_error_message(const GError *error)
{
    return error != NULL && error->message != NULL ? error->message : "unknown error";
}

#endif /* AUTHBROKER_CGIO_SHIM_H */
