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
        "org.authbroker.Credential",
        SECRET_SCHEMA_NONE,
        {
            { "provider", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "issuer", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "client_id", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "subject", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { NULL, 0 },
        },
    };
    return &schema;
}

/* Stores `secret` (UTF-8 text) in the default collection. An item of the
 * schema with the same four attributes in that collection is replaced. */
static inline gboolean authbroker_secret_store(const gchar *label,
                                               const gchar *provider,
                                               const gchar *issuer,
                                               const gchar *client_id,
                                               const gchar *subject,
                                               const gchar *secret,
                                               GCancellable *cancellable,
                                               GError **error)
{
    return secret_password_store_sync(authbroker_credential_schema(),
                                      SECRET_COLLECTION_DEFAULT, label, secret,
                                      cancellable, error,
                                      "provider", provider,
                                      "issuer", issuer,
                                      "client_id", client_id,
                                      "subject", subject,
                                      NULL);
}

/* Removes the items with these four attributes. Returns TRUE if at least one
 * was removed; FALSE with *error == NULL if there was none. */
static inline gboolean authbroker_secret_clear(const gchar *provider,
                                               const gchar *issuer,
                                               const gchar *client_id,
                                               const gchar *subject,
                                               GCancellable *cancellable,
                                               GError **error)
{
    return secret_password_clear_sync(authbroker_credential_schema(),
                                      cancellable, error,
                                      "provider", provider,
                                      "issuer", issuer,
                                      "client_id", client_id,
                                      "subject", subject,
                                      NULL);
}

/* Every item of the schema in every collection, unlocking locked ones (this may
 * show the desktop's unlock prompt) and loading their secrets in one round trip.
 * Returns a GList of SecretRetrievable (free with authbroker_object_list_free);
 * NULL when there is none or on error (check *error). */
static inline GList *authbroker_secret_search_all(GCancellable *cancellable, GError **error)
{
    return secret_password_search_sync(authbroker_credential_schema(),
                                       SECRET_SEARCH_ALL | SECRET_SEARCH_UNLOCK | SECRET_SEARCH_LOAD_SECRETS,
                                       cancellable, error,
                                       NULL);
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
static inline AuthbrokerStoreState authbroker_secret_check(GCancellable *cancellable, GError **error)
{
    GError *local = NULL;
    GList *found = secret_password_search_sync(authbroker_credential_schema(),
                                               SECRET_SEARCH_NONE, cancellable, &local,
                                               "provider", "\001authbroker-check",
                                               NULL);
    g_list_free_full(found, g_object_unref);
    if (local != NULL) {
        g_propagate_error(error, local);
        return AUTHBROKER_STORE_ERROR;
    }

    /* secret_collection_for_alias_sync(NULL, ...) is broken in libsecret 0.20.5
     * (it never gets the default service and returns NULL with a CRITICAL), so
     * get the service explicitly. */
    SecretService *service = secret_service_get_sync(SECRET_SERVICE_NONE, cancellable, &local);
    if (service == NULL) {
        if (local == NULL)
            local = g_error_new_literal(SECRET_ERROR, SECRET_ERROR_PROTOCOL, "could not connect to the Secret Service");
        g_propagate_error(error, local);
        return AUTHBROKER_STORE_ERROR;
    }
    SecretCollection *collection = secret_collection_for_alias_sync(service, SECRET_COLLECTION_DEFAULT,
                                                                    SECRET_COLLECTION_NONE, cancellable, &local);
    g_object_unref(service);
    if (local != NULL) {
        if (collection != NULL)
            g_object_unref(collection);
        g_propagate_error(error, local);
        return AUTHBROKER_STORE_ERROR;
    }
    if (collection == NULL)
        return AUTHBROKER_STORE_NO_DEFAULT;
    gboolean locked = secret_collection_get_locked(collection);
    g_object_unref(collection);
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

/* Whether the error is G_IO_ERROR_CANCELLED (our GCancellable fired). */
static inline gboolean authbroker_error_is_cancelled(const GError *error)
{
    return error != NULL && g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
}

#endif /* AUTHBROKER_CSECRET_SHIM_H */
