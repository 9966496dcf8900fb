async def test_healthz(client) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200


async def test_create_business(client, admin_headers) -> None:
    response = await client.post("/admin/businesses", json={"name": "Acme"}, headers=admin_headers)
    assert response.status_code == 201
    body = await response.get_json()
    assert body["name"] == "Acme"
    assert body["plan"] == "paid"
