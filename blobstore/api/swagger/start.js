// Starts Swagger UI on this server's OpenAPI document. A file of its own, not an inline script, so that /docs
// runs under a Content-Security-Policy without 'unsafe-inline'; no validator badge (it would load an image
// from another site).
"use strict";
window.addEventListener("DOMContentLoaded", () => {
  window.ui = window.SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null,
    presets: [window.SwaggerUIBundle.presets.apis, window.SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
});
