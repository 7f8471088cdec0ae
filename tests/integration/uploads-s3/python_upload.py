# The stock Python e2b SDK's COPY upload path (sdk-upload.test.ts): a background build of a template with a directory
# and a single-file COPY against the stand-in API named by STAND_IN_API_URL. Prints one JSON line for the test.
import json
import os
import sys

from e2b import Template

context, name = sys.argv[1], sys.argv[2]
template = (
    Template(file_context_path=context)
    .from_image("ubuntu:22.04")
    .copy("data/", "/app/data/")
    .copy("one.txt", "/app/one.txt")
)
logs = []
info = Template.build_in_background(
    template,
    name,
    api_key="e2b_stand_in",
    api_url=os.environ["STAND_IN_API_URL"],
    on_build_logs=lambda entry: logs.append(entry.message),
)
print(json.dumps({"templateId": info.template_id, "logs": logs}))
