"""STUB desktop notification server: org.freedesktop.Notifications on the tests' private
D-Bus session bus (no real notification daemon runs headless here).

    /usr/bin/python3 stub_notifications.py RECORD_FILE [--as mako]

Owns the name, answers Notify (ids 1, 2, …), CloseNotification, GetCapabilities and
GetServerInformation, and appends every call as one JSON line to RECORD_FILE. Prints
"ready" once the name is owned. A line "invoke ID ACTION" on stdin emits ActionInvoked
(what a click on the notification's button makes a real server send); a line "close ID"
emits NotificationClosed with reason 2 (the user dismissed it); a line "early ACTION" makes
the next Notify emit ActionInvoked ACTION ("close": NotificationClosed) for its id before its
answer (a user as quick as the bus: the order a real server can produce only by chance, which
a loaded machine showed once); end of stdin stops it. Needs PyGObject (Debian's python3-gi), hence the system python.

`--as mako` plays mako as its sources publish it (emersion/mako, dbus/xdg.c and
dbus/mako.c): GetServerInformation answers ("mako", "emersion", …), and the object
/fr/emersion/Mako on the same bus name serves the interface fr.emersion.Mako, whose
InvokeAction(u id, s action) — what `makoctl invoke -n ID ACTION` calls — lets any client
of the bus make the server emit ActionInvoked for a shown notification, as a click would.
"""
import json
import sys

from gi.repository import Gio, GLib

XML = """
<node>
  <interface name="org.freedesktop.Notifications">
    <method name="Notify">
      <arg type="s" direction="in"/><arg type="u" direction="in"/><arg type="s" direction="in"/>
      <arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="as" direction="in"/>
      <arg type="a{sv}" direction="in"/><arg type="i" direction="in"/><arg type="u" direction="out"/>
    </method>
    <method name="CloseNotification"><arg type="u" direction="in"/></method>
    <method name="GetCapabilities"><arg type="as" direction="out"/></method>
    <method name="GetServerInformation">
      <arg type="s" direction="out"/><arg type="s" direction="out"/><arg type="s" direction="out"/><arg type="s" direction="out"/>
    </method>
    <signal name="ActionInvoked"><arg type="u"/><arg type="s"/></signal>
    <signal name="NotificationClosed"><arg type="u"/><arg type="u"/></signal>
  </interface>
</node>
"""
MAKO_XML = """
<node>
  <interface name="fr.emersion.Mako">
    <method name="InvokeAction"><arg type="u" direction="in"/><arg type="s" direction="in"/></method>
    <method name="DismissAllNotifications"/>
    <method name="ListNotifications"><arg type="aa{sv}" direction="out"/></method>
  </interface>
</node>
"""
PATH = "/org/freedesktop/Notifications"
IFACE = "org.freedesktop.Notifications"
MAKO_PATH = "/fr/emersion/Mako"

record_file = sys.argv[1]
as_mako = sys.argv[2:4] == ["--as", "mako"]
shown = {}
loop = GLib.MainLoop()
state = {"next": 1, "connection": None}


def record(entry):
    with open(record_file, "a") as f:
        f.write(json.dumps(entry) + "\n")


def on_call(connection, sender, path, interface, method, params, invocation):
    args = params.unpack()
    if method == "Notify":
        app, replaces, icon, summary, body, actions, hints, timeout = args
        nid = replaces or state["next"]
        state["next"] += 1
        record({"call": "Notify", "id": nid, "app_name": app, "summary": summary, "body": body,
                "actions": list(actions), "hints": sorted(hints), "expire_timeout": timeout, "sender": sender})
        shown[nid] = list(actions)[0::2]
        early = state.pop("early", None)
        if early == "close":
            connection.emit_signal(None, PATH, IFACE, "NotificationClosed", GLib.Variant("(uu)", (nid, 2)))
        elif early:
            connection.emit_signal(None, PATH, IFACE, "ActionInvoked", GLib.Variant("(us)", (nid, early)))
        invocation.return_value(GLib.Variant("(u)", (nid,)))
    elif method == "CloseNotification":
        record({"call": "CloseNotification", "id": args[0]})
        invocation.return_value(None)
        connection.emit_signal(None, PATH, IFACE, "NotificationClosed", GLib.Variant("(uu)", (args[0], 3)))
    elif method == "GetCapabilities":
        invocation.return_value(GLib.Variant("(as)", (["actions", "body"],)))
    elif as_mako:
        record({"call": "GetServerInformation"})
        invocation.return_value(GLib.Variant("(ssss)", ("mako", "emersion", "0.0.0", "1.2")))
    else:
        invocation.return_value(GLib.Variant("(ssss)", ("STUB", "authbroker tests", "1", "1.2")))


def on_mako_call(connection, sender, path, interface, method, params, invocation):
    """mako's own interface: InvokeAction from any client emits the action as the server."""
    args = params.unpack()
    record({"call": "mako." + method, "args": list(args), "sender": sender})
    if method == "InvokeAction":
        nid, action = args
        if action in shown.get(nid, []):
            connection.emit_signal(None, PATH, IFACE, "ActionInvoked", GLib.Variant("(us)", (nid, action)))
        invocation.return_value(None)
    elif method == "ListNotifications":
        invocation.return_value(GLib.Variant("(aa{sv})", ([{"id": GLib.Variant("u", n)} for n in shown],)))
    else:
        invocation.return_value(None)


def on_bus(connection, name):
    state["connection"] = connection
    node = Gio.DBusNodeInfo.new_for_xml(XML)
    connection.register_object(PATH, node.interfaces[0], on_call, None, None)
    if as_mako:
        connection.register_object(MAKO_PATH, Gio.DBusNodeInfo.new_for_xml(MAKO_XML).interfaces[0], on_mako_call, None, None)


def on_name(connection, name):
    print("ready", flush=True)


def on_lost(connection, name):
    print("name lost", file=sys.stderr, flush=True)
    loop.quit()


def on_stdin(channel, condition):
    line = channel.readline()
    if not line:
        loop.quit()
        return False
    words = line.split()
    if len(words) == 3 and words[0] == "invoke":
        state["connection"].emit_signal(None, PATH, IFACE, "ActionInvoked", GLib.Variant("(us)", (int(words[1]), words[2])))
        state["connection"].flush_sync(None)
        print("invoked", flush=True)
    elif len(words) == 2 and words[0] == "close":
        state["connection"].emit_signal(None, PATH, IFACE, "NotificationClosed", GLib.Variant("(uu)", (int(words[1]), 2)))
        state["connection"].flush_sync(None)
        print("closed", flush=True)
    elif len(words) == 2 and words[0] == "early":
        state["early"] = words[1]
        print("early", flush=True)
    return True


Gio.bus_own_name(Gio.BusType.SESSION, IFACE, Gio.BusNameOwnerFlags.NONE, on_bus, on_name, on_lost)
GLib.io_add_watch(GLib.IOChannel.unix_new(sys.stdin.fileno()), GLib.PRIORITY_DEFAULT, GLib.IO_IN | GLib.IO_HUP, on_stdin)
loop.run()
