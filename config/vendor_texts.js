// Texts of Django's admin widgets (SelectFilter2.js) that its Simplified Chinese catalogue
// lacks. Never served or run: makemessages -d djangojs reads it, and the translations in
// locale/zh_Hans/LC_MESSAGES/djangojs.po win over Django's own (LOCALE_PATHS).
gettext("Choose all %s");
gettext("Choose selected %s");
gettext("Remove all %s");
gettext("Remove selected %s");
gettext('Choose %s by selecting them and then select the "Choose" arrow button.');
gettext('Remove %s by selecting them and then select the "Remove" arrow button.');
gettext("(click to clear)");
