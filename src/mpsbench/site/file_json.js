/* mpsbench: asv's pages opened from disk (file://), where browsers refuse XMLHttpRequest and fetch.
 * mpsbench.site.patches writes beside each NAME.json a twin NAME.json.js that hands the same content to
 * mpsbenchJSON; from file:// this transport loads that twin with a <script> element. Over http(s) asv's
 * own requests run unchanged.
 */
(function ($) {
    "use strict";
    if (window.location.protocol !== "file:") {
        return;
    }
    window.mpsbenchJSON = function (script, data) {
        script.mpsbenchData = data;  // read back by the script's load handler, which runs right after it
    };
    $.ajaxTransport("json", function (options) {
        var script = null;
        function done() {
            if (script !== null) {
                script.onload = script.onerror = null;
                script.remove();
                script = null;
            }
        }
        return {
            send: function (headers, complete) {
                script = document.createElement("script");
                script.src = options.url.split("?")[0] + ".js";  // asv's ?timestamp= only defeats caches
                script.onload = function () {
                    var data = script.mpsbenchData;
                    done();
                    if (data === undefined) {
                        complete(404, "no data in the .json.js twin");
                    } else {
                        complete(200, "OK", {json: data});
                    }
                };
                script.onerror = function () {
                    done();
                    complete(404, "Not Found");  // a graph asv did not write: asv shows "no data", as over http
                };
                document.head.appendChild(script);
            },
            abort: done
        };
    });
    // When no graph of a page loads, asv asks for swallow.ico to tell "no data" from "server down"; from disk
    // there is no server to be down.
    $.ajaxTransport("text", function (options) {
        if (!/(^|\/)swallow\.ico(\?|$)/.test(options.url)) {
            return undefined;
        }
        return {
            send: function (headers, complete) {
                complete(200, "OK", {text: ""});
            },
            abort: function () {}
        };
    });
})(jQuery);
